"""The OpInfo sweep: every operator of PyTorch's `op_db`, run eagerly and compiled, compared
(`sweep.py` runs one operator, `test_opinfo.py` the pytest cases, `record_refusals.py` the
reference run through torch.compile). See docs/correctness.md."""
