"""Layer 2: non-strict tracing (`make_fx`) and its purity checks."""
