"""User-settable knobs, read at the moment they matter.

Set them as attributes: `graphwright.config.cache_size_limit = 16`.
"""

cache_size_limit: int = 8
"""Compiled entries kept per function; past this, calls run eagerly with a warning."""

reorderable_logging: bool = True
"""Logger and `warnings.warn` calls in a compiled region are replayed after the graph."""

reorderable_print: bool = False
"""Also replay `print` after the graph instead of breaking it."""

verbose: bool = False
"""Attach graphwright's internal traceback to errors and fallback warnings."""
