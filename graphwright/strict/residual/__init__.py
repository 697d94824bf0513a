"""Residual code: what runs in Python around the graphs: side effects replayed after a graph,
and, at a graph break, the code that continues the function in a resume function."""
