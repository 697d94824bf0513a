"""PyTorch's own Python library compiled as a new user would: training steps with every
optimizer of `torch.optim` and with learning-rate schedulers, `nn.MultiheadAttention` and the
Transformer modules, `torch.distributions`, parametrizations, packed sequences, embeddings and
gradient clipping.

Each program runs eagerly and compiled (`graphwright.compile`, backends `eager` and
`aot_eager`, `fullgraph=True` and `False`), compared in values, gradients, `state_dict` and
optimizer state, and in graph count with `torch.compile` on the same program. torch.compile's
counts (from `torch._dynamo.testing.CompileCounter`) are recorded in each table, `None` where
it raises; the slow `test_torch_compile_gives_the_recorded_counts` checks them again (compiling
with TorchDynamo costs more than the quick tests themselves).

What differs from torch.compile, and why:
- an optimizer's first step fills `self.state` (keyed by the parameters): both compilers
  run `_init_group` for real before tracing it (`strict/objects/optimizer_state.py`), so the
  step compiles once. A hand-written optimizer recompiles in both (tests/programs/
  cases_torch_library.py).
- TorchDynamo traces every torch.optim step as if `capturable=True` were set in its param
  groups (its view of them only; a rule for torch.optim alone), so RAdam's and ASGD's
  single-tensor steps, which branch on a tensor (`if rho_t > 5.0`) without it, are one
  graph there; graphwright traces the program's own path: a data-dependent branch in the
  loop, the step's function runs in Python (one graph fewer, the same values).
- `torch.compile` turns off argument validation of `torch.distributions` for the whole
  process the first time it runs (`Distribution.set_default_validate_args(False)`), which is
  why it needs one graph for a distribution built with validation on; graphwright keeps the
  validation, whose checks depend on the data: a break at each check.
- `fullgraph=True` training steps raise in both compilers (`loss.backward()`, and
  `torch._dynamo.graph_break()` at the top of every `Optimizer.step`).
"""
from __future__ import annotations

import contextlib
import copy
import warnings

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch.nn.functional as F
from torch import distributions as D
from torch import nn
from torch.nn.utils import parametrizations, parametrize

import graphwright
from graphwright.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


# ----------------------------------------------------------------------------- optimizers

OPTIMIZERS = {
    "SGD_momentum": lambda params, foreach: torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=foreach),
    "SGD_nesterov": lambda params, foreach: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True,
                                                            foreach=foreach),
    "Adam": lambda params, foreach: torch.optim.Adam(params, lr=0.01, foreach=foreach),
    "AdamW": lambda params, foreach: torch.optim.AdamW(params, lr=0.01, foreach=foreach),
    "Adamax": lambda params, foreach: torch.optim.Adamax(params, lr=0.01, foreach=foreach),
    "NAdam": lambda params, foreach: torch.optim.NAdam(params, lr=0.01, foreach=foreach),
    "RAdam": lambda params, foreach: torch.optim.RAdam(params, lr=0.01, foreach=foreach),
    "RMSprop": lambda params, foreach: torch.optim.RMSprop(params, lr=0.01, foreach=foreach),
    "Adagrad": lambda params, foreach: torch.optim.Adagrad(params, lr=0.01, foreach=foreach),
    "Adadelta": lambda params, foreach: torch.optim.Adadelta(params, lr=0.5, foreach=foreach),
    "ASGD": lambda params, foreach: torch.optim.ASGD(params, lr=0.01, foreach=foreach),
    "Rprop": lambda params, foreach: torch.optim.Rprop(params, lr=0.01, foreach=foreach),
}

# Graphs after three training steps under fullgraph=False, (graphwright, torch.compile): the
# forward, the optimizer step and the `loss.detach()` after `zero_grad` (RAdam and ASGD: see
# the module docstring); SGD has no state to fill but a momentum buffer made on the first
# step, in both. Adamax with foreach: under `is_compiling()` its multi-tensor step
# gives `_foreach_addcdiv_` a list of tensors, which the operator rejects: the step runs as
# eager Python (torch.compile takes the `capturable` path instead, by a rule of its own).
OPTIMIZER_GRAPHS = {
    ("SGD_momentum", False): (4, 4), ("SGD_momentum", True): (4, 4),
    ("SGD_nesterov", False): (4, 4), ("SGD_nesterov", True): (4, 4),
    ("Adam", False): (3, 3), ("Adam", True): (3, 3),
    ("AdamW", False): (3, 3), ("AdamW", True): (3, 3),
    ("Adamax", False): (3, 3), ("Adamax", True): (2, 3),
    ("NAdam", False): (3, 3), ("NAdam", True): (3, 3),
    ("RAdam", False): (2, 3), ("RAdam", True): (2, 3),
    ("RMSprop", False): (3, 3), ("RMSprop", True): (3, 3),
    ("Adagrad", False): (3, 3), ("Adagrad", True): (3, 3),
    ("Adadelta", False): (3, 3), ("Adadelta", True): (3, 3),
    ("ASGD", False): (2, 3), ("ASGD", True): (3, 3),
    ("Rprop", False): (3, 3), ("Rprop", True): (3, 3),
}
QUICK_OPTIMIZERS = [("SGD_momentum", True), ("Adam", False), ("Adam", True), ("Adamax", True)]

SCHEDULERS = {
    "StepLR": lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
    "CosineAnnealingLR": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4),
    "OneCycleLR": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10),
    "LambdaLR": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch),
}
# (graphwright, torch.compile) graphs after three steps of Adam with the scheduler stepped
# inside the compiled function (True) or after it (False). The learning rate is a float in
# `param_groups`: in both compilers the first step specialises it and the recompile after it
# changed takes it as a graph input, so no step compiles again for a new rate. Both compilers
# never trace `torch.optim.lr_scheduler` (a graph break at `scheduler.step()` and at the
# `optimizer.step` wrapper it installs), so stepping the scheduler inside costs no graph.
SCHEDULER_GRAPHS = {
    ("StepLR", True): (4, 4), ("StepLR", False): (4, 4),
    ("CosineAnnealingLR", True): (4, 4), ("CosineAnnealingLR", False): (4, 4),
    ("OneCycleLR", True): (4, 4), ("OneCycleLR", False): (4, 4),
    ("LambdaLR", True): (4, 4), ("LambdaLR", False): (4, 4),
}
QUICK_SCHEDULERS = [("StepLR", True), ("OneCycleLR", False)]


def _training_world(optimizer, foreach, scheduler=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = OPTIMIZERS[optimizer](model.parameters(), foreach)
    return model, opt, SCHEDULERS[scheduler](opt) if scheduler else None


def _train_step(model, opt, scheduler=None):
    def step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if scheduler is not None:
            scheduler.step()
        return loss.detach()
    return step


def _run_training(optimizer, foreach, compile_fn=None, scheduler=None, inside=True, steps=3):
    """Three steps from fixed seeds: the losses, the model's and optimizer's state dicts, the
    learning rates."""
    model, opt, sched = _training_world(optimizer, foreach, scheduler)
    step = _train_step(model, opt, sched if inside else None)
    if compile_fn is not None:
        step = compile_fn(step)
    losses, rates = [], []
    for index in range(steps):
        torch.manual_seed(10 + index)
        losses.append(step(torch.randn(4, 6), torch.randn(4, 3)))
        if sched is not None and not inside:
            sched.step()
        rates.append(opt.param_groups[0]["lr"])
    return losses, copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()), rates


def _assert_same_training(got, expected):
    for value, wanted in zip(got, expected):
        torch.testing.assert_close(value, wanted)


def _graphwright_counted(backend, fullgraph):
    counter = CompileCounterWithBackend(backend)
    return counter, lambda fn: graphwright.compile(fn, backend=counter, fullgraph=fullgraph)


def _torch_counted(fullgraph):
    counter = torch._dynamo.testing.CompileCounter()
    return counter, lambda fn: torch.compile(fn, backend=counter, fullgraph=fullgraph)


@contextlib.contextmanager
def _torch_compile_state():
    """torch.compile changes process state the first time it runs (distributions' validation):
    put it back afterwards."""
    validate = D.Distribution._validate_args
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch._dynamo.reset()
        D.Distribution.set_default_validate_args(validate)


QUICK_AOT = [("Adam", True)]


@contextlib.contextmanager
def _fresh_optimizers():
    """The optimizers as a fresh process has them. The first torch.compile of a process wraps
    every optimizer's `_init_group` in `torch._dynamo.disable`, which graphwright honours (the
    state is then made eagerly, no second graph): undo that while graphwright runs."""
    patched = {cls: cls.__dict__["_init_group"] for cls in vars(torch.optim).values()
               if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)
               and hasattr(cls.__dict__.get("_init_group"), "_torchdynamo_orig_callable")}
    for cls, wrapper in patched.items():
        cls._init_group = wrapper._torchdynamo_orig_callable
    try:
        yield
    finally:
        for cls, wrapper in patched.items():
            cls._init_group = wrapper


def _optimizer_params():
    params = []
    for backend in BACKENDS:
        quick = QUICK_OPTIMIZERS if backend == "eager" else QUICK_AOT
        for name, foreach in OPTIMIZER_GRAPHS:
            params.append(pytest.param(name, foreach, backend, id=f"{name}-foreach{int(foreach)}-{backend}",
                                       marks=() if (name, foreach) in quick else pytest.mark.slow))
    return params


@pytest.mark.parametrize("optimizer,foreach,backend", _optimizer_params())
def test_training_step_with_optimizer_matches_eager(optimizer, foreach, backend):
    graphwright.reset()
    expected = _run_training(optimizer, foreach)
    counter, compile_fn = _graphwright_counted(backend, fullgraph=False)
    with _fresh_optimizers():
        got = _run_training(optimizer, foreach, compile_fn)
    _assert_same_training(got, expected)
    assert counter.frame_count == OPTIMIZER_GRAPHS[(optimizer, foreach)][0]
    graphwright.reset()


def test_after_torch_compile_patched_the_optimizers_the_state_is_made_eagerly_as_there():
    """Once torch.compile has run, `_init_group` is `torch._dynamo.disable`d; graphwright
    honours the mark: Adam's step then needs one graph, as in torch.compile."""
    with _torch_compile_state():
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))  # applies PyTorch's patches
    graphwright.reset()
    expected = _run_training("Adam", False)
    counter, compile_fn = _graphwright_counted("eager", fullgraph=False)
    got = _run_training("Adam", False, compile_fn)
    _assert_same_training(got, expected)
    assert counter.frame_count == OPTIMIZER_GRAPHS[("Adam", False)][1] == 3
    graphwright.reset()


@pytest.mark.parametrize("scheduler,inside", [
    pytest.param(name, inside, id=f"{name}-{'inside' if inside else 'outside'}",
                 marks=() if (name, inside) in QUICK_SCHEDULERS else pytest.mark.slow)
    for name, inside in SCHEDULER_GRAPHS])
def test_training_step_with_a_scheduler_matches_eager(scheduler, inside):
    graphwright.reset()
    expected = _run_training("Adam", False, scheduler=scheduler, inside=inside)
    counter, compile_fn = _graphwright_counted("eager", fullgraph=False)
    with _fresh_optimizers():
        got = _run_training("Adam", False, compile_fn, scheduler=scheduler, inside=inside)
    _assert_same_training(got, expected)
    assert counter.frame_count == SCHEDULER_GRAPHS[(scheduler, inside)][0]
    graphwright.reset()


@pytest.mark.parametrize("optimizer", ["SGD_momentum", "Adam"])
def test_training_step_under_fullgraph_stops_at_backward_in_both_compilers(optimizer):
    graphwright.reset()
    _, compile_fn = _graphwright_counted("eager", fullgraph=True)
    with pytest.raises(graphwright.Unsupported, match="autograd API"):
        _run_training(optimizer, False, compile_fn, steps=1)
    with _torch_compile_state():
        _, torch_compile_fn = _torch_counted(fullgraph=True)
        with pytest.raises(torch._dynamo.exc.Unsupported, match="backward"):
            _run_training(optimizer, False, torch_compile_fn, steps=1)
    graphwright.reset()


# ----------------------------------------------------------------- modules and utilities

def _padding_mask():
    return torch.tensor([[False] * 5, [False] * 3 + [True] * 2])


def _attention(batch_first, need_weights, masked, train):
    def make():
        return nn.MultiheadAttention(8, 2, batch_first=batch_first).train(train)

    def inputs():
        query = torch.randn(2, 5, 8) if batch_first else torch.randn(5, 2, 8)
        return (query, query, query), {"key_padding_mask": _padding_mask() if masked else None,
                                       "need_weights": need_weights}
    return make, inputs


def _encoder(train, masked):
    def make():
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).train(train)
    return make, lambda: ((torch.randn(2, 5, 8),), {"src_key_padding_mask": _padding_mask() if masked else None})


def _decoder(train):
    def make():
        layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        return nn.TransformerDecoder(layer, 2).train(train)
    return make, lambda: ((torch.randn(2, 4, 8), torch.randn(2, 5, 8)),
                          {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(4)})


def _transformer(train):
    def make():
        return nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True).train(train)
    return make, lambda: ((torch.randn(2, 5, 8), torch.randn(2, 4, 8)),
                          {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(4),
                           "src_key_padding_mask": _padding_mask()})


def _distribution(kind):
    def build(loc, scale, x):
        scale = scale.abs() + 0.1
        if kind == "Normal":
            d = D.Normal(loc, scale, validate_args=False)
            return d.log_prob(x), d.entropy(), d.rsample(), d.mean
        if kind == "Categorical":
            d = D.Categorical(logits=loc, validate_args=False)
            return d.log_prob(torch.tensor([0, 1, 2])), d.entropy(), d.probs
        if kind == "MultivariateNormal":
            d = D.MultivariateNormal(loc[0], covariance_matrix=torch.diag(scale[0]), validate_args=False)
            return d.log_prob(x), d.entropy(), d.rsample((2,))
        if kind == "Independent":
            d = D.Independent(D.Normal(loc, scale, validate_args=False), 1, validate_args=False)
            return d.log_prob(x), d.entropy(), d.rsample()
        d = D.TransformedDistribution(D.Normal(loc, scale, validate_args=False), [D.transforms.ExpTransform()],
                                      validate_args=False)
        return d.log_prob(x.abs() + 0.1), d.rsample()
    return (lambda: build), lambda: ((torch.randn(3, 3, requires_grad=True), torch.rand(3, 3), torch.randn(3, 3)), {})


def _parametrized(kind):
    def make():
        layer = nn.Linear(4, 4)
        if kind == "custom":
            class Symmetric(nn.Module):
                def forward(self, weight):
                    return weight.triu() + weight.triu(1).transpose(-1, -2)
            parametrize.register_parametrization(layer, "weight", Symmetric())
        else:
            getattr(parametrizations, kind)(layer)
        return layer
    return make, lambda: ((torch.randn(3, 4, requires_grad=True),), {})


class PackedRNN(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(4, 5, batch_first=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True)


def _clipping(how):
    def make():
        model = nn.Linear(4, 3)

        def step(x):
            model(x).pow(2).sum().backward()
            if how == "norm":
                norm = nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            else:
                norm = nn.utils.clip_grad_value_(model.parameters(), 0.05)
            grads = [p.grad.clone() for p in model.parameters()]
            model.zero_grad()
            return norm, grads
        return step
    return make, lambda: ((torch.randn(2, 4),), {})


# name -> (make, inputs, graphs under fullgraph=True, graphs under fullgraph=False), graphs as
# (graphwright, torch.compile) after two calls, None where the compiler raises.
LIBRARY = {}
for _bf in (True, False):
    for _nw in (True, False):
        for _masked in (True, False):
            for _train in (True, False):
                LIBRARY[f"MultiheadAttention-batch_first{int(_bf)}-need_weights{int(_nw)}-mask{int(_masked)}-"
                        f"{'train' if _train else 'eval'}"] = (*_attention(_bf, _nw, _masked, _train), (1, 1), (1, 1))
for _train in (True, False):
    _mode = "train" if _train else "eval"
    for _masked in (True, False):
        LIBRARY[f"TransformerEncoder-{_mode}-mask{int(_masked)}"] = (*_encoder(_train, _masked), (1, 1), (1, 1))
    # `_detect_is_causal_mask` compares the mask with a causal one (`torch.equal`), a branch
    # on data: both compilers refuse it under fullgraph; torch.compile then gives the whole
    # call up, graphwright compiles the layers' work around it
    LIBRARY[f"TransformerDecoder-{_mode}"] = (*_decoder(_train), (None, None), (1, 0))
    LIBRARY[f"Transformer-{_mode}"] = (*_transformer(_train), (None, None), (1, 0))
for _kind in ("Normal", "Categorical", "MultivariateNormal", "Independent", "TransformedDistribution"):
    LIBRARY[f"distributions.{_kind}"] = (*_distribution(_kind), (1, 1), (1, 1))
for _kind in ("weight_norm", "spectral_norm", "orthogonal", "custom"):
    LIBRARY[f"parametrize-{_kind}"] = (*_parametrized(_kind), (1, 1), (1, 1))
for _cell in ("LSTM", "GRU"):
    # packing sorts by the lengths' values: both compilers stop there and run it eagerly
    LIBRARY[f"pack_padded_sequence-{_cell}"] = (
        lambda cell=_cell: PackedRNN(getattr(nn, cell)),
        lambda: ((torch.randn(3, 6, 4, requires_grad=True), torch.tensor([6, 3, 2])), {}), (None, None), (0, 0))
LIBRARY["Embedding-padding_idx"] = (lambda: nn.Embedding(10, 4, padding_idx=0),
                                    lambda: ((torch.tensor([[0, 2, 3], [4, 0, 9]]),), {}), (1, 1), (1, 1))
LIBRARY["Embedding-max_norm"] = (lambda: nn.Embedding(10, 4, max_norm=1.0),
                                 lambda: ((torch.tensor([[0, 2, 3], [4, 0, 9]]),), {}), (1, 1), (1, 1))
for _how in ("norm", "value"):
    LIBRARY[f"clip_grad_{_how}"] = (*_clipping(_how), (None, None), (2, 2))

QUICK_LIBRARY = {"MultiheadAttention-batch_first1-need_weights1-mask1-train",
                 "MultiheadAttention-batch_first0-need_weights0-mask1-eval", "TransformerEncoder-eval-mask1",
                 "TransformerDecoder-eval", "distributions.MultivariateNormal", "distributions.Categorical",
                 "parametrize-orthogonal", "pack_padded_sequence-LSTM", "Embedding-max_norm", "clip_grad_norm"}


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value.to_padded_tensor(0.0) if value.is_nested else value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _run_library(name, compile_fn=None, calls=2):
    """Two calls from fixed seeds: outputs, gradients (inputs and parameters), state_dict."""
    make, inputs = LIBRARY[name][:2]
    torch.manual_seed(0)
    target = make()
    callee = target if compile_fn is None else compile_fn(target)
    records = []
    for index in range(calls):
        torch.manual_seed(10 + index)
        args, kwargs = inputs()
        torch.manual_seed(5)  # the same random draws (rsample) in both runs
        outputs = _tensors(callee(*args, **kwargs))
        grads = []
        differentiable = [t for t in outputs if t.requires_grad]
        if differentiable:
            sum(t.sin().sum() for t in differentiable).backward()
            grads = [a.grad for a in _tensors(args) if a.requires_grad]
            if isinstance(target, nn.Module):
                grads += [p.grad.clone() for p in target.parameters() if p.grad is not None]
                target.zero_grad()
        records.append(([t.detach() for t in outputs], grads))
    state = copy.deepcopy(target.state_dict()) if isinstance(target, nn.Module) else {}
    return records, state


def _library_params():
    return [pytest.param(name, fullgraph, backend, id=f"{name}-fullgraph{int(fullgraph)}-{backend}",
                         marks=() if name in QUICK_LIBRARY and backend == "eager" else pytest.mark.slow)
            for name in LIBRARY for fullgraph in (True, False) for backend in BACKENDS]


@pytest.mark.parametrize("name,fullgraph,backend", _library_params())
def test_library_program_matches_eager(name, fullgraph, backend):
    graphwright.reset()
    expected = _run_library(name)
    wanted = LIBRARY[name][2 if fullgraph else 3][0]
    counter, compile_fn = _graphwright_counted(backend, fullgraph)
    if wanted is None:
        with pytest.raises(graphwright.Unsupported):
            _run_library(name, compile_fn)
        return
    got = _run_library(name, compile_fn)
    torch.testing.assert_close(got, expected)
    assert counter.frame_count == wanted
    graphwright.reset()


def test_distribution_validation_stays_on_and_raises_as_eager():
    """torch.compile turns validation off for the process; graphwright keeps it, as eager."""
    graphwright.reset()

    def normal(loc, scale):
        return D.Normal(loc, scale).log_prob(loc)

    compiled = graphwright.compile(normal, backend="eager")
    torch.testing.assert_close(compiled(torch.zeros(3), torch.ones(3)), normal(torch.zeros(3), torch.ones(3)))
    with pytest.raises(ValueError, match="scale"):
        compiled(torch.zeros(3), -torch.ones(3))
    graphwright.reset()


@pytest.mark.slow
@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("name", list(LIBRARY))
def test_torch_compile_gives_the_recorded_library_counts(name, fullgraph):
    wanted = LIBRARY[name][2 if fullgraph else 3][1]
    with _torch_compile_state():
        counter, compile_fn = _torch_counted(fullgraph)
        if wanted is None:
            with pytest.raises(Exception):
                _run_library(name, compile_fn)
            return
        _run_library(name, compile_fn)
        assert counter.frame_count == wanted


@pytest.mark.slow
@pytest.mark.parametrize("optimizer,foreach", list(OPTIMIZER_GRAPHS))
def test_torch_compile_gives_the_recorded_optimizer_counts(optimizer, foreach):
    with _torch_compile_state():
        counter, compile_fn = _torch_counted(fullgraph=False)
        _run_training(optimizer, foreach, compile_fn)
        assert counter.frame_count == OPTIMIZER_GRAPHS[(optimizer, foreach)][1]


@pytest.mark.slow
@pytest.mark.parametrize("scheduler,inside", list(SCHEDULER_GRAPHS))
def test_torch_compile_gives_the_recorded_scheduler_counts(scheduler, inside):
    with _torch_compile_state():
        counter, compile_fn = _torch_counted(fullgraph=False)
        _run_training("Adam", False, compile_fn, scheduler=scheduler, inside=inside)
        assert counter.frame_count == SCHEDULER_GRAPHS[(scheduler, inside)][1]
