"""The real-model suite runs offline, with empty compile caches around every test.

`HF_HUB_OFFLINE=1` is set before anything imports transformers: the models are
built from configs with random weights and nothing may be downloaded.

The slow cases of the breadth matrices (every optimizer, diffusers model, repo-style and
new-library model under each backend and `fullgraph` setting, each against torch.compile) are also
marked `breadth`: together they take longer than CI's budget, so `make test` leaves them
to `make test-breadth` and runs their quick cases.
"""
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402

import graphwright  # noqa: E402


BREADTH_MODULES = {"test_diffusers.py", "test_pytorch_repos.py", "test_torch_library.py",
                   "test_new_libraries.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in BREADTH_MODULES and item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.breadth)


@pytest.fixture(autouse=True)
def fresh_caches():
    graphwright.reset()
    yield
    graphwright.reset()
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:  # the reference counts compile with torch.compile
        dynamo.reset()
