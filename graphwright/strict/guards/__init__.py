"""Guards and code generation: sources (where a value came from), guards over them, and the
generated entry function that checks guards and runs the captured graph."""
