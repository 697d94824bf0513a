"""DTensor in the strict tracer and ahead-of-time autograd, in one process.

A mesh of two ranks from PyTorch's fake process group (this process is rank 0;
collectives run, the same way eagerly and compiled). What a graph specialises
on in a DTensor program: the device mesh by identity (an attribute of the
graph module, never an input), placements by equality, a DTensor input's
placements and local tensor; with symbolic sizes one graph serves every
size. DTensor's API in the region (`from_local`, `redistribute`, `to_local`)
runs on the DTensors under AOT autograd: where eager would share memory
between its result and its argument and the program mutates one of them, the
graph runs as captured. `torch._dynamo.disable(fn)` called inside the region,
as FSDP2's hooks call it, is a graph break naming `fn`.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.testing._internal.distributed.fake_pg import FakeStore

import graphwright
from graphwright.testing import CompileCounterWithBackend
from test_aot_subclasses import RecordingBackend, assert_plain_graphs

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="needs torch.distributed")


@pytest.fixture(scope="module")
def mesh():
    initialized_here = not dist.is_initialized()
    if initialized_here:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    yield init_device_mesh("cpu", (2,))
    if initialized_here:
        dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _sharded(mesh, *shape, placement=Shard(0)):
    return DTensor.from_local(torch.randn(*shape), mesh, [placement])


def _compiled(fn, backend="aot_eager", **options):
    counter = CompileCounterWithBackend(backend)
    return graphwright.compile(fn, backend=counter, **options), counter


def test_the_mesh_is_an_attribute_of_the_graph_and_placements_are_constants(mesh):
    def gather(t):
        return DTensor.from_local(t, mesh, [Shard(0)]).redistribute(mesh, [Replicate()]).to_local() * 2

    compiled, counter = _compiled(gather, fullgraph=True)
    t = torch.randn(3, 2)
    torch.testing.assert_close(compiled(t), gather(t))
    (graph,) = counter.graphs
    assert [node.name for node in graph.graph.nodes if node.op == "placeholder"] == ["t"]
    (mesh_node,) = [node for node in graph.graph.nodes if node.op == "get_attr"]
    assert getattr(graph, mesh_node.target) is mesh
    assert "Replicate()" in graph.code and "Shard(dim=0)" in graph.code


def test_another_mesh_of_the_same_shape_recompiles(mesh):
    other = DeviceMesh("cpu", [0, 1])
    assert other is not mesh

    def doubled(x):
        return (x * 2).redistribute(placements=[Replicate()]).to_local()

    compiled, counter = _compiled(doubled)
    for device_mesh in (mesh, other, mesh):
        x = _sharded(device_mesh, 4, 2)
        torch.testing.assert_close(compiled(x), doubled(x))
    assert counter.frame_count == 2


PLAN = {"placement": Shard(0)}


def test_a_placement_read_from_a_global_is_guarded_by_equality(mesh):
    def placed(x):
        return x.redistribute(mesh, [PLAN["placement"]]).to_local() + 1

    compiled, counter = _compiled(placed)
    try:
        for placement in (Shard(0), Shard(0), Shard(1), Replicate()):
            PLAN["placement"] = placement
            x = _sharded(mesh, 4, 4, placement=Replicate())
            torch.testing.assert_close(compiled(x), placed(x))
    finally:
        PLAN["placement"] = Shard(0)
    assert counter.frame_count == 3


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_dtensor_inputs_with_symbolic_sizes_compile_once(mesh, backend):
    def scaled(x):
        return (x * 2).redistribute(mesh, [Replicate()]).to_local() + x.to_local().sum()

    compiled, counter = _compiled(scaled, backend, dynamic=True)
    for rows in (2, 3, 5):
        x = _sharded(mesh, rows, 3)
        torch.testing.assert_close(compiled(x), scaled(x))
    assert counter.frame_count == 1


def test_gradients_of_a_dtensor_input_are_dtensors_placed_as_in_eager(mesh):
    def loss(x, w):
        return (x.redistribute(mesh, [Replicate()]).to_local() * w).sum()

    compiled, _ = _compiled(loss, fullgraph=True)
    local, w = torch.randn(3, 2), torch.randn(6, 2)
    expected_x = DTensor.from_local(local.clone(), mesh, [Shard(0)]).requires_grad_()
    actual_x = DTensor.from_local(local.clone(), mesh, [Shard(0)]).requires_grad_()
    loss(expected_x, w).backward()
    compiled(actual_x, w).backward()
    assert type(actual_x.grad) is DTensor and actual_x.grad.placements == expected_x.grad.placements
    torch.testing.assert_close(actual_x.grad.to_local(), expected_x.grad.to_local())


def test_mutating_the_local_tensor_of_a_dtensor_runs_the_graph_as_captured(mesh):
    """`to_local()` is a view of the DTensor's local tensor: an in-place change shows through the DTensor."""
    def bumped(x):
        local = x.to_local()
        local.add_(1)
        return x * 2

    x = _sharded(mesh, 4, 2)
    expected_x = DTensor.from_local(x.to_local().clone(), mesh, [Shard(0)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = graphwright.compile(bumped, backend="aot_eager")(x)
    expected = bumped(expected_x)
    torch.testing.assert_close(actual.to_local(), expected.to_local())
    torch.testing.assert_close(x.to_local(), expected_x.to_local())
    refusals = [str(w.message) for w in caught if "without its backend" in str(w.message)]
    assert len(refusals) == 1 and "calls `DTensor.to_local` and mutates its result" in refusals[0]


def _helper(x):
    return x * 3


def test_disable_called_inside_the_region_is_a_graph_break_naming_the_function():
    def calls_disabled(x):
        return graphwright.disable(_helper)(x + 1) - 1

    explained = graphwright.explain(calls_disabled)(torch.randn(3))
    assert explained.graph_break_count == 1
    assert "`_helper` is marked to never be compiled" in str(explained.break_reasons[0].reason)
    x = torch.randn(3)
    torch.testing.assert_close(graphwright.compile(calls_disabled, backend="eager")(x), calls_disabled(x))


def test_a_graph_traced_under_implicit_replication_recompiles_outside_it(mesh):
    """Outside `implicit_replication()` eager refuses a plain tensor next to a DTensor; the graph
    traced inside it must not run there."""
    from torch.distributed.tensor.experimental import implicit_replication

    def shifted(x, bias):
        return (x + bias).to_local()

    compiled, counter = _compiled(shifted)
    x, bias = _sharded(mesh, 4, 3, placement=Replicate()), torch.randn(3)
    with implicit_replication():
        torch.testing.assert_close(compiled(x, bias), shifted(x, bias))
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        shifted(x, bias)
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        compiled(x, bias)
    assert counter.frame_count == 1


def test_a_partial_dtensor_output_takes_its_gradient_as_eager_does(mesh):
    """A `Partial` output's tangent is traced replicated (`__coerce_tangent_metadata__`); the
    gradient that arrives is redistributed to it (`__coerce_same_metadata_as_tangent__`)."""
    from torch.distributed.tensor import Partial

    def partial_sum(t):
        return DTensor.from_local(t * 2, mesh, [Partial()])

    compiled, _ = _compiled(partial_sum, fullgraph=True)
    expected_t, actual_t = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    with torch.no_grad():
        actual_t.copy_(expected_t)
    expected, actual = partial_sum(expected_t), compiled(actual_t)
    assert actual.placements == expected.placements == (Partial(),)
    expected.full_tensor().pow(2).sum().backward()
    actual.full_tensor().pow(2).sum().backward()
    torch.testing.assert_close(actual_t.grad, expected_t.grad)


def test_the_aten_graphs_hold_plain_tensors_and_functional_collectives(mesh):
    from torch.distributed.tensor import Partial

    def gathered(x, t):
        whole = x.redistribute(mesh, [Replicate()]).to_local()
        summed = DTensor.from_local(t, mesh, [Partial()]).redistribute(mesh, [Replicate()]).to_local()
        return (whole * summed).sum()

    backend = RecordingBackend()
    x = DTensor.from_local(torch.randn(2, 3), mesh, [Shard(0)]).requires_grad_()
    t = torch.randn(4, 3, requires_grad=True)
    graphwright.compile(gathered, backend=backend, fullgraph=True)(x, t).backward()
    assert_plain_graphs(backend.graphs)
    targets = {kind: {str(node.target) for node in gm.graph.nodes} for kind, gm in backend.graphs}
    assert {"_c10d_functional.all_gather_into_tensor.default", "_c10d_functional.all_reduce.default",
            "_c10d_functional.wait_tensor.default"} <= targets["forward"]
    assert type(x.grad) is DTensor and x.grad.placements == (Shard(0),) and t.grad is not None
