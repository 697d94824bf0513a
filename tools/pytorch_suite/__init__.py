"""A harness that runs PyTorch's own TorchDynamo test files against graphwright.

PyTorch's `test/dynamo/*.py` files are the widest map of what users expect
`torch.compile` to do with Python. They are never copied into this project: the
harness takes a folder OUTSIDE the repository that holds them (with their
`utils.py`), and runs each file twice in fresh pytest processes:

1. on PyTorch, as it is (`plugin.py` only records each test's outcome);
2. on graphwright: before the file imports, `torch.compile`,
   `torch._dynamo.optimize`, `torch._dynamo.optimize_assert`,
   `torch._dynamo.reset` and `torch.compiler.reset` are rebound to graphwright
   (`plugin.py` says exactly how), so the same test compiles with graphwright.

`portability.py` classifies each test from its source: a test is portable
when it checks only values, graph counts and the public API; one that asserts
TorchDynamo's internal counters, guard objects, logs, graph or error text, or
config that graphwright does not read is not (the rules are listed there, each
with its reason). `python -m tools.pytorch_suite DIR` (`make
test-pytorch-suite PYTORCH_TESTS=DIR`) prints per file: tests, passed on
PyTorch, portable among those, passed on graphwright among those, and writes
each test's outcome and first failure line for triage.
"""
