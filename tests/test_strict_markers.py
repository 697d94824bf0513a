"""PyTorch's own markers keep their meaning under graphwright: code asking whether it is being
compiled (every spelling libraries use) is told yes, and TorchScript's checks are told no.
Compiled and eager answers differ by design here, so these are not differential programs."""
import torch
import torch._dynamo
import torch._utils

import graphwright
from graphwright.testing import CompileCounter


def test_every_is_compiling_spelling_is_true_while_tracing_and_false_eagerly():
    def flags(x):
        compiling = (torch.compiler.is_compiling(), torch.compiler.is_dynamo_compiling(),
                     torch._dynamo.is_compiling(), torch._utils.is_compiling(),
                     torch._dynamo.external_utils.is_compiling())
        scripting = (torch.jit.is_scripting(), torch.jit.is_tracing(), torch.compiler.is_exporting(),
                     torch._C._get_tracing_state() is not None)
        return x * 2, compiling, scripting

    counter = CompileCounter()
    _, compiling, scripting = graphwright.compile(flags, backend=counter, fullgraph=True)(torch.ones(2))
    assert compiling == (True,) * 5 and scripting == (False,) * 4
    assert counter.frame_count == 1
    _, compiling, _ = flags(torch.ones(2))
    assert compiling == (False,) * 5


def test_library_code_takes_its_compile_friendly_branch():
    def helper(x):  # the shape of transformers' is_torchdynamo_compiling() checks
        if not torch.compiler.is_compiling():
            graphwright.graph_break()
        return x + 1

    counter = CompileCounter()
    assert torch.equal(graphwright.compile(helper, backend=counter, fullgraph=True)(torch.ones(2)),
                       torch.full((2,), 2.0))
    assert counter.frame_count == 1
