"""Layer 3: ahead-of-time autograd on top of the non-strict tracer."""
