"""Layer 5: the strict tracer — a symbolic interpreter of CPython 3.11 bytecode."""
