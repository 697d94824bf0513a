"""Two gloo processes on the CPU that train a model wrapped in DistributedDataParallel.

`run_scenarios(names)` spawns the processes (torch.multiprocessing), runs every
named scenario in each, and returns what rank 0 and rank 1 measured: whether
the gradients after several optimizer steps equal an uncompiled DDP run's,
graphs compiled, graph breaks, and the order in which the backward pieces ran
and DDP's buckets were all-reduced.
"""
from __future__ import annotations

import json
import os
import re
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import graphwright
from graphwright.backends import lookup_backend
from graphwright.backends.ddp_buckets import graph_buckets

WIDTH = 512  # a 512x512 float weight is 1 MiB: one bucket per layer at bucket_cap_mb=1
STEPS = 3


class Layers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [torch.nn.Linear(8, WIDTH)] + [torch.nn.Linear(WIDTH, WIDTH) for _ in range(4)]
            + [torch.nn.Linear(WIDTH, 4)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class RecordingBackend:
    """Compiles with `backend`; each compiled graph (piece) logs when its backward starts, and
    keeps what `graph_buckets` makes of the graph it was given."""

    def __init__(self, backend: str, log: list) -> None:
        self.backend = lookup_backend(backend)
        self.log = log
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        index = self.graphs
        self.graphs += 1
        compiled = self.backend(gm, example_inputs)
        log = self.log

        def run(*args):
            outputs = compiled(*args)
            for output in outputs:
                if isinstance(output, torch.Tensor) and output.requires_grad:
                    output.register_hook(lambda grad: log.append(["backward", index]))
            return outputs

        return run


def _wrap(module: torch.nn.Module, log: list) -> DDP:
    """`module` in DDP at 1 MiB buckets, logging each bucket's all-reduce."""
    ddp = DDP(module, bucket_cap_mb=1)

    def allreduce(state, bucket):
        log.append(["allreduce", bucket.index()])
        return default_hooks.allreduce_hook(None, bucket)

    ddp.register_comm_hook(None, allreduce)
    return ddp


def _layers() -> Layers:
    torch.manual_seed(0)
    return Layers()


def _train(model: torch.nn.Module, rank: int, step_function=None, log: list | None = None
           ) -> list[torch.Tensor]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        if log is not None:
            log.append(["step", step])
        torch.manual_seed(100 + 10 * rank + step)  # each rank its own data
        x = torch.randn(6, 8)
        optimizer.zero_grad()
        loss = step_function(model, x) if step_function else model(x).pow(2).sum()
        loss.backward()
        optimizer.step()
    return [p.grad.clone() for p in model.parameters()]


def _scenario(name: str, rank: int) -> dict:
    backend, way = name.split(":")
    graphwright.reset()
    reference_log: list = []
    expected = _train(_wrap(_layers(), reference_log), rank)
    log: list = []
    recording = RecordingBackend(backend, log)
    step_function = None
    if way == "compile_then_wrap":
        model = _wrap(graphwright.compile(_layers(), backend=recording), log)
    elif way == "in_region":
        model = _wrap(_layers(), log)

        @graphwright.compile(backend=recording)
        def step_function(model, x):
            return model(x * 1.0).pow(2).sum()
    else:
        model = graphwright.compile(_wrap(_layers(), log), backend=recording)
        if way == "no_buckets":
            graphwright.config.optimize_ddp = False
    try:
        with graphwright.debug.report() as report:
            grads = _train(model, rank, step_function, log)
    finally:
        graphwright.config.optimize_ddp = True
    return {
        "grads_equal": all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(grads, expected)),
        "graphs": recording.graphs,
        "graph_breaks": dict(graphwright.counters["graph_break"]),
        "log": log,
        "buckets_expected": _bucket_count(),
        "report": re.findall(r"compiled in \d+ pieces, one per DDP gradient bucket", report.html()),
    }


def _bucket_count() -> int:
    """What `graph_buckets` makes of the model's captured graph at 1 MiB buckets."""
    graphs = []
    graphwright.compile(Layers(), backend=lambda gm, inputs: graphs.append((gm, inputs)) or gm.forward,
                        fullgraph=True)(torch.randn(6, 8))
    gm, inputs = graphs[0]
    return len(graph_buckets(gm, inputs, 2 ** 20, 2 ** 20))


def _torch_compile_graphs(rank: int) -> int:
    """Graphs torch.compile hands its backend for the same DDP model (its DDP optimizer's pieces)."""
    import torch._dynamo

    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    _train(DDP(torch.compile(_layers(), backend=counting), bucket_cap_mb=1), rank)
    return len(graphs)


def _explain() -> dict:
    """`graphwright.explain` of a DDP model: the module it wraps, captured as `compile` runs it."""
    graphwright.reset()
    output = graphwright.explain(DDP(_layers(), bucket_cap_mb=1))(torch.randn(6, 8))
    direct = graphwright.explain(_layers())(torch.randn(6, 8))
    return {"graph_count": output.graph_count, "graph_break_count": output.graph_break_count,
            "ops": [str(op) for ops in output.ops_per_graph for op in ops],
            "ops_of_the_module": [str(op) for ops in direct.ops_per_graph for op in ops]}


def _worker(rank: int, world: int, port: int, names: list[str], out_dir: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # two processes on a small shared machine: intra-op threads only contend
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {}
        for name in names:
            if name == "torch_compile":
                results[name] = _torch_compile_graphs(rank)
            elif name == "explain":
                results[name] = _explain()
            else:
                results[name] = _scenario(name, rank)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as file:
            json.dump(results, file)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_scenarios(names: list[str]) -> list[dict]:
    """Run the scenarios (`"backend:way"`, or `"torch_compile"`) in two processes; per rank, the
    results by name."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(2, _free_port(), names, out_dir), nprocs=2)
        results = []
        for rank in range(2):
            with open(os.path.join(out_dir, f"rank{rank}.json")) as file:
                results.append(json.load(file))
        return results
