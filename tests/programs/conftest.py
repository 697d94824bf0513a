"""Every corpus-directory test starts and ends with empty compile caches."""
import pytest

from .harness import reset_compiler


@pytest.fixture(autouse=True)
def fresh_cache():
    reset_compiler()
    yield
    reset_compiler()
