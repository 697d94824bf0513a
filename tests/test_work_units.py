"""How `make test`'s workers share the suite (tests/conftest.py): whole files, except the
real-model suite, taken one model at a time."""
from __future__ import annotations

import pytest

from conftest import work_unit

pytest.importorskip("xdist")

REAL = "tests/real_models/test_real_models.py"


def test_a_models_cases_are_one_unit_and_each_model_its_own():
    cases = [f"{REAL}::test_compiled_model_matches_eager[gpt2-train-aot_eager]",
             f"{REAL}::test_compiled_model_matches_eager[gpt2-eval-inductor]",
             f"{REAL}::test_torch_compile_needs_the_recorded_graph_counts[gpt2-outputs]"]
    assert {work_unit(nodeid) for nodeid in cases} == {f"{REAL}:gpt2"}
    assert work_unit(f"{REAL}::test_compiled_model_matches_eager[gpt_neo-train-eager]") == f"{REAL}:gpt_neo"


def test_any_other_file_is_one_unit():
    assert work_unit("tests/test_distributed_ddp.py::test_gradients_equal_uncompiled_ddp[eager-wrap]") == \
        "tests/test_distributed_ddp.py"
    assert work_unit("tests/programs/test_corpus.py::test_program_names_are_unique") == "tests/programs/test_corpus.py"


def test_the_scheduler_splits_only_under_loadfile(pytestconfig, monkeypatch):
    import conftest

    monkeypatch.setattr(pytestconfig.option, "dist", "load", raising=False)
    assert conftest.pytest_xdist_make_scheduler(pytestconfig, log=None) is None
    monkeypatch.setattr(pytestconfig.option, "dist", "loadfile", raising=False)
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"], raising=False)  # what `-n 2` sets
    scheduler = conftest.pytest_xdist_make_scheduler(pytestconfig, log=None)
    assert scheduler._split_scope(f"{REAL}::test_compiled_model_matches_eager[bert-eval-eager]") == f"{REAL}:bert"


def test_long_units_are_taken_first(pytestconfig, monkeypatch):
    import conftest

    monkeypatch.setattr(pytestconfig.option, "dist", "loadfile", raising=False)
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"], raising=False)
    scheduler = conftest.pytest_xdist_make_scheduler(pytestconfig, log=None)
    many = [f"tests/test_strict_guards.py::test_{i}" for i in range(5)]
    fuzz = "tests/fuzz/test_fuzz.py::test_generated_programs_match_eager"
    collection = [*many, fuzz]
    taken = []

    class Node:
        def send_runtest_some(self, indices):
            taken.extend(collection[i] for i in indices)

    node = Node()
    scheduler.registered_collections[node] = collection
    scheduler.workqueue.update({"tests/test_strict_guards.py": dict.fromkeys(many, False),
                                "tests/fuzz/test_fuzz.py": {fuzz: False}})
    scheduler._assign_work_unit(node)
    assert taken == [fuzz]
    scheduler._assign_work_unit(node)
    assert taken == [fuzz, *many]
