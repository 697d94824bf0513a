"""graphwright's AOT cache in one process: what its key holds, what it refuses to cache, and how
an entry is found again (after `graphwright.reset()`) or reported when damaged. Restarts in
fresh processes are in test_inductor_cache.py."""
import copy
import logging
import pathlib
import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import graphwright
from graphwright._core import config
from graphwright.aot import cache as aot_cache
from graphwright.aot import compile as aot_compile_module


class _Store:
    def __init__(self, identity: str = "store") -> None:
        self._identity = identity

    def identity(self) -> str:
        return self._identity


class _Model(torch.nn.Module):
    """Functional calls only, so that `symbolic_trace` leaves no module calls in the graph."""

    def __init__(self, activation=torch.relu) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 4))
        self.bias = torch.nn.Parameter(torch.randn(3))
        self.activation = activation

    def forward(self, x):
        return self.activation(torch.nn.functional.linear(x, self.weight, self.bias)).sum(1)


def _key(model=None, shape=(2, 4), dtype=torch.float32, requires_grad=False, grad_enabled=True,
         recompute=True, store=None) -> str:
    gm = torch.fx.symbolic_trace(model or _Model())
    mode = FakeTensorMode()
    with mode:
        fakes = [torch.empty(shape, dtype=dtype).requires_grad_(requires_grad),
                 *(mode.from_tensor(p) for p in gm.parameters())]
    return aot_cache.signature_key(gm, fakes, mode, grad_enabled, recompute, store or _Store())


def test_the_key_is_stable_and_changes_with_everything_that_decides_the_products():
    base = _key()
    assert _key() == base
    changed = {
        "op": _key(_Model(torch.tanh)),
        "shape": _key(shape=(3, 4)),
        "dtype": _key(dtype=torch.float64),
        "requires_grad": _key(requires_grad=True),
        "grad mode": _key(grad_enabled=False),
        "recompute": _key(recompute=False),
        "backend config": _key(store=_Store("other")),
    }
    with torch.autocast("cpu"):
        changed["autocast"] = _key()
    torch.use_deterministic_algorithms(True)
    try:
        changed["deterministic"] = _key()
    finally:
        torch.use_deterministic_algorithms(False)
    previous = config.reorderable_print
    config.reorderable_print = not previous
    try:
        changed["graphwright.config"] = _key()
    finally:
        config.reorderable_print = previous
    assert all(key != base for key in changed.values()), changed
    assert len(set(changed.values())) == len(changed)


def _users_function(x):
    return x.cos()


torch.fx.wrap("_users_function")


def test_a_graph_calling_the_users_own_function_is_not_cached():
    class CallsUserCode(torch.nn.Module):
        def forward(self, x):
            return _users_function(x) + 1

    gm = torch.fx.symbolic_trace(CallsUserCode())
    mode = FakeTensorMode()
    with mode:
        x = torch.empty(3)
    with pytest.raises(aot_cache.Bypass, match="_users_function"):
        aot_cache.signature_key(gm, [x], mode, True, True, _Store())


@pytest.fixture
def cache_folder(tmp_path, monkeypatch) -> pathlib.Path:
    """A fresh folder for Inductor's caches and graphwright's AOT cache."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "graphwright"))
    graphwright.reset()
    yield tmp_path / "graphwright" / "aot"
    graphwright.reset()


def _train_step(model, x):
    compiled = graphwright.compile(model, fullgraph=True, backend="inductor")
    out = compiled(x)
    out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return out, grads, compiled


def _aot_counters() -> dict:
    return dict(graphwright.counters["aot_cache"])


def test_compiling_again_after_reset_skips_aot_and_matches_eager(cache_folder, monkeypatch):
    torch.manual_seed(0)
    model, x = _Model(), torch.randn(5, 4)
    expected = model(x)
    expected.sum().backward()
    expected_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    out, grads, _ = _train_step(model, x)
    assert _aot_counters() == {"aot_cache_miss": 1}
    assert len(list(cache_folder.iterdir())) == 1
    graphwright.reset()

    def traced(*args, **kwargs):
        raise AssertionError("AOT autograd traced the graph again")

    monkeypatch.setattr(aot_compile_module.joint, "trace_signature", traced)
    out_again, grads_again, _ = _train_step(model, x)
    assert _aot_counters() == {"aot_cache_hit": 1}
    assert graphwright.counters["inductor"]["fxgraph_cache_hit"] == 2
    for result, gradients in ((out, grads), (out_again, grads_again)):
        torch.testing.assert_close(result, expected)
        for grad, expected_grad in zip(gradients, expected_grads):
            torch.testing.assert_close(grad, expected_grad)


def test_a_damaged_entry_is_reported_and_compiled_again(cache_folder):
    model, x = _Model(), torch.randn(5, 4)
    _train_step(model, x)
    (entry,) = cache_folder.iterdir()
    entry.write_bytes(b"not a pickle")
    graphwright.reset()
    with pytest.warns(UserWarning, match=r"AOT cache entry .* is unreadable .*compiling the graph again"):
        out, _, _ = _train_step(model, x)
    torch.testing.assert_close(out, model(x))
    assert _aot_counters() == {"aot_cache_miss": 1}
    graphwright.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train_step(model, x)  # the compile wrote the entry again
    assert _aot_counters() == {"aot_cache_hit": 1}


def test_a_graph_whose_aot_graphs_are_logged_is_compiled_not_loaded(cache_folder, caplog):
    model, x = _Model(), torch.randn(5, 4)
    _train_step(model, x)
    graphwright.reset()
    graphwright.set_logs(aot_graphs=True)
    try:
        _train_step(model, x)
    finally:
        graphwright.set_logs()
    assert _aot_counters() == {"aot_cache_bypass": 1}


def test_an_unwritable_cache_folder_warns_and_keeps_the_compiled_graph(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(config, "cache_dir", str(blocker))  # no folder can be made inside a file
    graphwright.reset()
    model, x = _Model(), torch.randn(5, 4)
    with pytest.warns(UserWarning, match="cannot write the AOT cache entry .* a later process compiles it again"):
        out, grads, _ = _train_step(model, x)
    graphwright.reset()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    for grad, parameter in zip(grads, model.parameters()):
        torch.testing.assert_close(grad, parameter.grad)


@graphwright.nonstrict_trace
def _scaled(x):
    return x * 3


def test_the_caches_channel_says_why_a_graph_is_not_cached(cache_folder, caplog):
    logger = logging.getLogger("graphwright.caches")
    logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="graphwright.caches"):
            x = torch.randn(3)
            out = graphwright.compile(lambda x: _scaled(x).sin(), backend="inductor", fullgraph=True)(x)
    finally:
        graphwright.set_logs()
    torch.testing.assert_close(out, (x * 3).sin())
    assert _aot_counters() == {"aot_cache_bypass": 1}
    (message,) = [r.getMessage() for r in caplog.records if r.name == "graphwright.caches"]
    assert message.startswith("AOT cache bypass for ") and "<lambda> (" in message and "test_aot_cache.py" in message
    assert "_scaled" in message and "user code" in message
    assert not cache_folder.exists()


def _views(x):
    y = x * 2
    return x[1:], y, y.t()


def test_a_hit_writes_back_mutated_buffers_and_rebuilds_aliasing_outputs(cache_folder):
    """The runtime rebuilt from an entry does what functionalization took out of the graphs."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    reference = copy.deepcopy(model)
    for expected_counters in ({"aot_cache_miss": 2}, {"aot_cache_hit": 2}):
        graphwright.reset()
        x, a = torch.randn(6, 4), torch.randn(3, 3)
        out = graphwright.compile(model, backend="inductor", fullgraph=True)(x)
        out.sum().backward()
        expected = reference(x)
        expected.sum().backward()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(model[1].running_mean, reference[1].running_mean)
        assert model[1].num_batches_tracked == reference[1].num_batches_tracked
        for parameter, expected_parameter in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(parameter.grad, expected_parameter.grad)
        tail, doubled, transposed = graphwright.compile(_views, backend="inductor")(a)
        assert tail.data_ptr() == a[1:].data_ptr() and transposed.data_ptr() == doubled.data_ptr()
        for got, want in zip((tail, doubled, transposed), _views(a)):
            torch.testing.assert_close(got, want)
        assert _aot_counters() == expected_counters
