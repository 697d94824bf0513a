"""The real-model suite runs offline, with empty compile caches around every test.

`HF_HUB_OFFLINE=1` is set before anything imports transformers: the models are
built from configs with random weights and nothing may be downloaded.
"""
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402

import graphwright  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:  # the reference counts compile with torch.compile
        dynamo.reset()
