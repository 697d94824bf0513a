"""Hugging Face's ModelOutput classes inside a compiled region, fullgraph=True, as eager.

`transformers.utils.ModelOutput` is an OrderedDict subclass that every subclass
turns into a @dataclass with `__post_init__`; it overrides `__getitem__`,
`__setitem__`, `__setattr__` and `__contains__`, and its metaclass wraps the
dataclass `__init__`. Every Hugging Face model builds one in its forward.
"""
import copy
import os

import pytest
import torch
from torch import nn

import graphwright
from graphwright.testing import CompileCounter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
outputs = pytest.importorskip("transformers.modeling_outputs")


def _state(output):
    """Everything observable of a ModelOutput: its class, items (in order) and attributes."""
    return type(output), list(output.items()), dict(vars(output))


def _assert_same(expected, actual):
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
        return
    assert type(actual) is type(expected)
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected)
        for e, a in zip(expected, actual):
            _assert_same(e, a)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            _assert_same(expected[key], actual[key])
    else:
        assert actual == expected


def _outputs_built_inside(x):
    out = outputs.BaseModelOutputWithNoAttention(last_hidden_state=x * 2, hidden_states=(x, x + 1))
    lm = outputs.CausalLMOutputWithCrossAttentions(logits=out[0] + 1)
    lm.loss = lm.logits.sum()
    return (out, lm, out.last_hidden_state, out[1][0], "loss" in lm, "attentions" in lm,
            lm.to_tuple(), list(lm.keys()), len(out.values()), [key for key, _ in out.items()],
            out["hidden_states"][1], lm.attentions is None, dict(**out)["last_hidden_state"])


def test_model_outputs_built_inside_match_eager_in_one_graph():
    counter = CompileCounter()
    compiled = graphwright.compile(_outputs_built_inside, backend=counter, fullgraph=True)
    x = torch.randn(2, 3)
    expected, actual = _outputs_built_inside(x), compiled(x)
    for index in (0, 1):
        _assert_same(_state(expected[index]), _state(actual[index]))
    _assert_same(list(expected[2:]), list(actual[2:]))
    assert counter.frame_count == 1


def test_pytorch_also_compiles_model_outputs_built_inside_in_one_graph():
    import torch._dynamo
    import torch._dynamo.testing

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    torch.compile(_outputs_built_inside, backend=counter, fullgraph=True)(torch.randn(2, 3))
    assert counter.frame_count == 1
    torch._dynamo.reset()


def _add_loss(out, target):
    out.loss = ((out.logits - target) ** 2).mean()
    out["hidden_states"] = (out.logits * 2,)
    return out[0], out.loss, out.to_tuple()


def test_model_output_passed_in_is_read_and_mutated_as_eager():
    compiled = graphwright.compile(_add_loss, backend="eager", fullgraph=True)
    logits, target = torch.randn(2, 4), torch.randn(2, 4)
    eager_output = outputs.CausalLMOutputWithCrossAttentions(logits=logits)
    compiled_output = copy.copy(eager_output)
    expected, actual = _add_loss(eager_output, target), compiled(compiled_output, target)
    _assert_same(list(expected), list(actual))
    _assert_same(_state(eager_output), _state(compiled_output))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 10)

    def forward(self, ids, labels=None):
        hidden = self.embed(ids)
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.view(-1, 10), labels.view(-1))
        return outputs.CausalLMOutputWithCrossAttentions(loss=loss, logits=logits, hidden_states=(hidden,))


def test_module_returning_a_model_output_trains_like_eager():
    torch.manual_seed(0)
    eager_model = TinyLM()
    compiled_model = copy.deepcopy(eager_model)
    counter = CompileCounter()
    compiled = graphwright.compile(compiled_model, backend=counter, fullgraph=True)
    ids, labels = torch.randint(0, 10, (2, 5)), torch.randint(0, 10, (2, 5))
    expected, actual = eager_model(ids, labels=labels), compiled(ids, labels=labels)
    _assert_same(_state(expected), _state(actual))
    expected.loss.backward()
    actual["loss"].backward()
    for (name, e), (_, a) in zip(eager_model.named_parameters(), compiled_model.named_parameters()):
        torch.testing.assert_close(a.grad, e.grad, msg=name)
    assert counter.frame_count == 1


@graphwright.nonstrict_trace
def _scaled_head(out):
    return outputs.BaseModelOutput(last_hidden_state=out.last_hidden_state * 2, hidden_states=(out[0],))


def _through_nonstrict(x):
    result = _scaled_head(outputs.BaseModelOutput(last_hidden_state=x + 1))
    return result, result.last_hidden_state + 1, list(result.keys())


def test_model_output_passes_into_and_out_of_a_nonstrict_trace_call_as_itself():
    counter = CompileCounter()
    compiled = graphwright.compile(_through_nonstrict, backend=counter, fullgraph=True)
    x = torch.randn(2, 3)
    expected, actual = _through_nonstrict(x), compiled(x)
    _assert_same(_state(expected[0]), _state(actual[0]))
    _assert_same(list(expected[1:]), list(actual[1:]))
    assert counter.frame_count == 1


def _from_pairs(x):
    out = outputs.BaseModelOutput({"last_hidden_state": x * 3, "hidden_states": (x,)})
    return out, out.last_hidden_state, list(out.keys())


def test_model_output_built_from_a_mapping_sets_each_pair_as_eager_does():
    compiled = graphwright.compile(_from_pairs, backend="eager", fullgraph=True)
    x = torch.randn(2)
    expected, actual = _from_pairs(x), compiled(x)
    _assert_same(_state(expected[0]), _state(actual[0]))
    _assert_same(list(expected[1:]), list(actual[1:]))
