"""`python -m bench`: see bench/harness.py."""
from .harness import main

main()
