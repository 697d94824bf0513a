"""Training loops as users write them, compiled whole: graph counts and recompiles equal to
torch.compile's, results equal to eager's.

- The loss reported with `f"{loss.item():.4f}"` after the `.item()` break: the resume function
  takes the float, symbolic from its second value; formatting it formats the value the entry
  received (after the graph), so no step after the second recompiles.
- A step that calls a compiled model and steps a learning-rate scheduler: neither compiler
  traces `torch.optim.lr_scheduler`, so its changing counters cost no graph.
"""
import logging
import warnings

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch.nn.functional as F
from torch import nn

import graphwright
from graphwright.testing import CompileCounter, CompileCounterWithBackend

STEPS = 10


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    torch._dynamo.reset()
    yield
    graphwright.reset()
    torch._dynamo.reset()


def _world(optimizer="sgd", scheduler=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05) if optimizer == "sgd" else \
        torch.optim.Adam(model.parameters(), lr=0.01)
    sched = None
    if scheduler == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    elif scheduler == "lambda":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch)
    return model, opt, sched


def _data():
    torch.manual_seed(1)
    return torch.randn(32, 8), torch.randn(32, 1)


def _printing_loop(compile_fn=None):
    """Ten steps printing the loss: what was printed, the losses, the counter."""
    model, opt, _ = _world()

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.4f}")
        return loss.detach()

    if compile_fn is not None:
        step = compile_fn(step)
    x, y = _data()
    return [step(x, y) for _ in range(STEPS)], model.state_dict()


def test_loss_printed_after_item_recompiles_once_like_torch_compile(capsys):
    expected = _printing_loop()
    printed = capsys.readouterr().out
    counter = CompileCounter()
    got = _printing_loop(lambda fn: graphwright.compile(fn, backend=counter))
    assert capsys.readouterr().out == printed
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    # the resume function after `.item()`: specialised on the first loss, symbolic from the
    # second; TorchDynamo's recompile log shows the same single recompile
    assert sum(graphwright.counters["recompiles"].values()) == 1
    theirs = torch._dynamo.testing.CompileCounter()
    _printing_loop(lambda fn: torch.compile(fn, backend=theirs))
    assert capsys.readouterr().out == printed
    # forward and loss, the optimizer step, `loss.detach()` after the print
    assert counter.frame_count == theirs.frame_count == 3


def _logging_loop(compile_fn=None):
    """Ten steps logging the loss and scaling the result by it: the resume function after
    `.item()` has a graph, taking the float as an input."""
    model, opt, _ = _world()
    logger = logging.getLogger("graphwright_training_loop")

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()
        logger.info(f"loss {value:.4f}, step {value!r}")
        return loss.detach() * value

    if compile_fn is not None:
        step = compile_fn(step)
    x, y = _data()
    return [step(x, y) for _ in range(STEPS)], model.state_dict()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_loss_logged_and_used_after_item_compiles_no_graph_per_step(backend, caplog):
    with caplog.at_level(logging.INFO, logger="graphwright_training_loop"):
        expected = _logging_loop()
    logged = [record.getMessage() for record in caplog.records]
    caplog.clear()
    counter = CompileCounterWithBackend(backend)
    frames = []

    def compile_fn(fn):
        compiled = graphwright.compile(fn, backend=counter)

        def counted(*args):
            result = compiled(*args)
            frames.append(counter.frame_count)
            return result
        return counted

    with caplog.at_level(logging.INFO, logger="graphwright_training_loop"):
        got = _logging_loop(compile_fn)
    messages = [record.getMessage() for record in caplog.records]
    if backend == "inductor":  # its kernels round differently in the last bits: the numbers are close
        assert len(messages) == len(logged)
        torch.testing.assert_close([float(m.split()[-1]) for m in messages], [float(m.split()[-1]) for m in logged])
    else:
        assert messages == logged
    torch.testing.assert_close(got, expected)
    # forward and loss, the optimizer step, the resume graph for the first loss and the one
    # taking the loss as a SymFloat input: no graph after the second step
    assert frames == [3] + [4] * (STEPS - 1)


def test_symbolic_float_formatted_then_compared_guards_the_text():
    """Reading the text (a comparison) fixes the float with a guard: each value that changes
    the outcome compiles its own entry, and every result is eager's."""
    def pick(x, rate):
        if f"{rate:.1f}" == "0.3":
            return x + 1
        return x - 1

    compiled = graphwright.compile(pick, backend="eager")
    for rate in (0.1, 0.2, 0.3, 0.31, 0.4):
        torch.testing.assert_close(compiled(torch.ones(2), rate), pick(torch.ones(2), rate))


def test_symbolic_int_formatted_into_a_returned_string():
    def report(x, step):
        return x * 2, f"step {step:04d}", "{}/{:>3}".format(step, step)

    counter = CompileCounter()
    compiled = graphwright.compile(report, backend=counter)
    for step in range(5):
        got, expected = compiled(torch.ones(2), step), report(torch.ones(2), step)
        assert got[1:] == expected[1:]
        torch.testing.assert_close(got[0], expected[0])
    assert counter.frame_count == 2


def _scheduled_training(optimizer, scheduler, compile_fn=None, steps=6):
    """A whole training step compiled, calling a model compiled on its own and stepping the
    scheduler: the losses, the learning rates, the model's state."""
    model, opt, sched = _world(optimizer, scheduler)
    called = model if compile_fn is None else compile_fn(model)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(called(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    if compile_fn is not None:
        step = compile_fn(step)
    x, y = _data()
    losses, rates = [], []
    for _ in range(steps):
        losses.append(step(x, y))
        rates.append(opt.param_groups[0]["lr"])
    return losses, rates, model.state_dict()


@pytest.mark.parametrize("optimizer,scheduler", [("sgd", "step"), ("adam", "lambda")])
def test_training_step_stepping_a_scheduler_makes_torch_compiles_graphs(optimizer, scheduler):
    expected = _scheduled_training(optimizer, scheduler)
    ours = CompileCounter()
    got = _scheduled_training(optimizer, scheduler, lambda fn: graphwright.compile(fn, backend=ours))
    # compiled Adam computes its step from tensors (as under torch.compile): last-bit differences
    torch.testing.assert_close(got, expected, **({"rtol": 0, "atol": 0} if optimizer == "sgd" else {}))
    theirs = torch._dynamo.testing.CompileCounter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _scheduled_training(optimizer, scheduler, lambda fn: torch.compile(fn, backend=theirs))
    # forward and loss, the optimizer step for the first rate and for the rate as an input,
    # `loss.detach()` after the scheduler's step
    assert ours.frame_count == theirs.frame_count == 4
    assert graphwright.counters["graph_break"]["Call to a function the tracer never traces"] == 2


def test_scheduler_step_under_fullgraph_names_the_scheduler():
    _, opt, sched = _world("sgd", "step")

    def step(x):
        sched.step()
        return x + 1

    with pytest.raises(graphwright.Unsupported, match="never traces") as raised:
        graphwright.compile(step, backend="eager", fullgraph=True)(torch.ones(2))
    assert "LRScheduler.step" in str(raised.value) and "torch.optim.lr_scheduler" in str(raised.value)
    assert "test_training_loops.py" in str(raised.value)


def test_a_spec_the_number_cannot_take_raises_at_the_f_string_as_eager():
    """A spec that fails on the number (`d` for a float) is formatted while tracing, so the
    program raises at the f-string, before anything after it runs, as eager does."""
    def bad(x, rate, log):
        text = f"{rate:d}"
        log.append(text)
        return x + 1

    compiled = graphwright.compile(bad, backend="eager")
    for rate in (0.1, 0.2, 0.3):
        log = []
        with pytest.raises(ValueError, match="Unknown format code 'd'"):
            compiled(torch.ones(2), rate, log)
        assert log == []
