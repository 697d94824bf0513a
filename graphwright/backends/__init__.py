"""Layer 4: the backend registry and the `eager`, `aot_eager`, `inductor` backends."""
