"""Benchmarks: graphwright against PyTorch, in the same run. See harness.py."""
