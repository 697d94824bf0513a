"""The generator's own tests: it makes what it claims, its programs are valid Python that
eager PyTorch runs, and the comparison can fail (a deliberately wrong backend is caught,
and its failure shrinks to a smaller program); a campaign run in chunks into a record
file summarizes as the whole campaign does, and failure signatures leave values out."""
from __future__ import annotations

import collections

import pytest
import torch

from fuzz.campaign import program_rng, read_records, run_campaign, shrink_failure, summarize
from fuzz.program import random_program
from fuzz.runner import MISMATCH, OK, Config, Outcome, check, load

# What the issue asks the generator to mix, by the features it records.
REQUIRED_FEATURES = {
    "tensor expressions": ["unary", "binary", "broadcast", "scalar", "reduction", "matmul", "where", "cast",
                           "integer", "indexing", "index_tensor", "input_float64"],
    "control flow": ["if_size", "if_int", "if_metadata", "if_global", "if_update", "for_constant", "for_int",
                     "for_size", "while", "grad_mode", "try"],
    "containers": ["list", "tuple", "dict", "sizes", "input_list"],
    "functions and classes": ["helper_function", "closure", "lambda_call", "nonlocal", "partial",
                              "object_affine", "object_subclass", "object_dataclass", "global_object"],
    "modules": ["module_call", "module_block", "module_sequential", "module_stack", "buffer_mutation",
                "module_training_branch"],
    "in-place and views": ["inplace", "setitem", "view_mutation", "view", "input_mutation"],
    "graph breaks": ["break_graph_break", "break_print", "break_item", "break_data_branch",
                     "break_unsupported_call", "break_disabled_call", "break_dynamic_shape",
                     "break_observed_exception"],
    "exceptions": ["exception_across_frames", "exception_in_loop", "exception_suppressed_by_with"],
    "marked functions": ["nonstrict_trace", "allow_in_graph", "leaf_function"],
    "side effects": ["side_effect_list", "side_effect_dict", "side_effect_global", "side_effect_global_tensor",
                     "side_effect_object", "side_effect_module", "side_effect_argument"],
    "calls": ["mutate_between_calls", "dynamic_True", "dynamic_False"],
    "jagged nested tensors": ["input_jagged", "jagged_unary", "jagged_binary", "jagged_scalar", "jagged_read",
                              "jagged_returned"],
    "iterator sources": ["iter_source_generator", "iter_source_class", "iter_source_iterable", "iter_source_genexp",
                         "iter_source_map", "iter_source_filter", "iter_source_list_iterator",
                         "iter_source_local_generator", "iter_source_halts", "iter_items_int", "iter_items_tensor",
                         "iter_items_mixed", "iter_next_before", "iter_consumed_twice", "iter_rest_observed",
                         "iter_caught_in_f", "iter_caught_in_callee"],
    "iterator consumers": ["iter_any", "iter_all", "iter_min_max", "iter_sorted_sum", "iter_zip", "iter_map_filter",
                           "iter_constructor", "iter_update_method", "iter_membership", "iter_pull",
                           "iter_itertools_slicing", "iter_itertools_combining", "iter_predicate_raises",
                           "iter_reduce_tensors", "iter_collect_tensors", "iter_cat_tensors", "iter_pick_tensor",
                           "iter_by_rank", "iter_rank_predicate", "iter_data_predicate"],
    "views": ["view_returned", "view_mutation", "view_of_input_written", "out_target", "out_target_input",
              "out_unary", "out_binary", "out_reduction", "out_mm", "view_transpose", "view_permute",
              "view_diagonal", "view_narrow", "view_select", "view_expand", "view_unbind", "view_split",
              "view_chunk", "view_step_slice", "view_unfold", "view_as_strided", "view_dtype_view", "view_complex",
              "view_index", "view_slice", "view_unsqueeze", "view_view"],
    "tensor subclasses": ["input_subclass", "module_subclass_parameter"],
}
SAMPLE = 400
MIN_SHARE = 0.01  # of programs


def _sample(count: int, seed: int) -> list:
    return [random_program(program_rng(seed, index))[0] for index in range(count)]


def test_every_feature_appears_at_a_measurable_rate():
    drawn = _sample(SAMPLE, seed=1)
    having = collections.Counter(feature for program in drawn for feature in set(program.features))
    rare = {f"{group}: {feature}": having[feature] for group, features in REQUIRED_FEATURES.items()
            for feature in features if having[feature] < MIN_SHARE * len(drawn)}
    assert not rare, f"features in fewer than {MIN_SHARE:.0%} of {len(drawn)} programs: {rare}"


def test_programs_without_planted_breaks_are_at_least_a_third():
    drawn = _sample(200, seed=2)
    assert sum(not program.breaks for program in drawn) > len(drawn) / 3


def test_generated_programs_run_eagerly_every_call():
    for program in _sample(60, seed=3):
        module = load(program.source)
        for call in module.CALLS:
            if call.get("mutate"):
                module.mutate()
            output = module.f(*module.make_inputs(call["A"], call["n"]))
            assert output is not None


def perturbing_backend(gm, example_inputs):
    """A wrong backend: the graph's first floating-point output is off by a little."""
    def run(*args):
        outputs = list(gm(*args))
        for index, value in enumerate(outputs):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                outputs[index] = value + 1e-2
                break
        return tuple(outputs)
    return run


def test_a_wrong_backend_is_caught():
    statuses = collections.Counter()
    for program in _sample(12, seed=4):
        report = check(program.source, [Config(perturbing_backend, False)])
        statuses.update(o.status for o in report.outcomes)
    assert statuses[MISMATCH] >= 6, statuses
    assert set(statuses) <= {OK, MISMATCH}, statuses  # OK: programs whose graphs return nothing used


def _body_lines(source: str) -> int:
    return source.split("\ndef f(", 1)[1].split("\ndef make_inputs", 1)[0].count("\n")


@pytest.mark.slow
def test_a_wrong_backend_failure_shrinks_to_a_smaller_program():
    config = Config(perturbing_backend, False)
    for index in range(50):
        program, choices = random_program(program_rng(6, index), max_statements=6)
        (outcome,) = check(program.source, [config]).outcomes
        if outcome.status == MISMATCH and _body_lines(program.source) >= 8:
            break
    shrunk, source = shrink_failure(choices, outcome, program.source, 6, seconds=240)
    assert shrunk.status == MISMATCH and shrunk.signature == outcome.signature
    assert _body_lines(source) <= _body_lines(program.source) // 2, source


def test_a_campaign_recorded_in_chunks_summarizes_as_one(tmp_path):
    record = tmp_path / "record.jsonl"
    config = [Config("eager", False)]
    whole = run_campaign(4, 9, config, max_statements=3, shrink=False, save=False, log=lambda line: None)
    for first in (0, 2):
        run_campaign(2, 9, config, max_statements=3, shrink=False, save=False, log=lambda line: None,
                     first=first, record=record)
    summary = summarize([record])
    assert summary.programs == 4 and [r["index"] for r in read_records(record)] == [0, 1, 2, 3]
    assert summary.statuses == whole.statuses and summary.features == whole.features
    record.write_text(record.read_text() + '{"seed": 9, "index": 4, "feat')  # a line cut short is skipped
    assert summarize([record]).programs == 4


def test_a_mismatch_signature_names_the_kind_of_difference_not_the_values():
    def signature(detail):
        return Outcome(Config("eager", False), MISMATCH, detail).signature

    assert signature("call 0 observed['TRACE'][1][0]: 's0' != 'all'") == "mismatch: observed values"
    assert signature("call 3 observed['TRACE'][2]: 7 != 8") == "mismatch: observed values"
    assert signature("call 0 output.stride[0]: 2 != 1") == "mismatch: output strides"
    assert signature("call 0 output[1].value: dtype torch.float64 != torch.int64") == "mismatch: output dtype"
    assert signature("call 2 output.requires_grad: True != False") == "mismatch: output requires_grad"
    assert signature("call 0 observed['TRACE']: length 7 != 8") == "mismatch: observed length"
