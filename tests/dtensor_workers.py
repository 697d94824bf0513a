"""Gloo processes on the CPU that train the tensor-parallel programs of `dtensor_programs.py`.

`run_scenarios(names, world)` spawns `world` processes (torch.multiprocessing),
runs every named scenario in each and returns what each rank measured. A
scenario `"<program>:<backend>"` trains the program three SGD steps eagerly
and compiled by graphwright with the backend (`eager`, `aot_eager`,
`inductor`), and reports whether the losses and the full weights
(`full_tensor()`) after the steps are equal, how many graphs the backend was
given, the graph breaks, and the warnings of a graph run without its backend;
`"<program>:torch_compile"` counts the graphs torch.compile makes of it (with
`aot_eager`) and checks its losses too.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from dtensor_programs import PROGRAMS, Program
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

import graphwright
from graphwright.testing import CompileCounterWithBackend

STEPS = 3
_FALLBACK_WARNINGS = ("without its backend", "could not compile")


_MESHES: dict[tuple[int, ...], object] = {}


def _mesh(program: Program):
    """One mesh per shape and process (a 2-D mesh makes process groups)."""
    shape = program.mesh_shape
    if shape not in _MESHES:
        _MESHES[shape] = init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp") if len(shape) == 2 else None)
    return _MESHES[shape]


def _train(program: Program, mesh, compile_fn=None) -> tuple[list[float], dict[str, torch.Tensor]]:
    model = program.build(mesh)
    run, loss_fn = model, program.loss
    if compile_fn is not None and program.compiled == "model":
        run = compile_fn(model)
    elif compile_fn is not None:
        loss_fn = compile_fn(program.loss)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad()
        with program.context():
            loss = loss_fn(run, *program.batch(mesh, step))
            loss.backward()
        optimizer.step()
        losses.append(loss.full_tensor().item() if isinstance(loss, DTensor) else loss.item())
    weights = {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()
               for name, p in model.named_parameters()}
    return losses, weights


def _equal(a, b, rtol: float, atol: float) -> bool:
    return all(torch.allclose(torch.as_tensor(x), torch.as_tensor(y), rtol=rtol, atol=atol) for x, y in zip(a, b))


def _scenario(name: str, expected: tuple) -> dict:
    program_name, backend = name.split(":")
    program = PROGRAMS[program_name]
    mesh = _mesh(program)
    if backend == "torch_compile":
        return _torch_compile(program, mesh, expected)
    graphwright.reset()
    counter = CompileCounterWithBackend(backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, weights = _train(program, mesh, lambda target: graphwright.compile(target, backend=counter))
    expected_losses, expected_weights = expected
    tolerance = (1e-4, 1e-5) if backend == "inductor" else (1e-5, 1e-6)
    return {
        "losses": losses,
        "losses_equal": _equal(losses, expected_losses, *tolerance),
        "weights_equal": weights.keys() == expected_weights.keys()
        and _equal(weights.values(), expected_weights.values(), *tolerance),
        "graphs": counter.frame_count,
        "graph_breaks": dict(graphwright.counters["graph_break"]),
        "fallbacks": [str(w.message).splitlines()[0] for w in caught
                      if any(text in str(w.message) for text in _FALLBACK_WARNINGS)],
    }


def _torch_compile(program: Program, mesh, expected: tuple) -> dict:
    import torch._dynamo
    from torch._dynamo.testing import CompileCounterWithBackend as TorchCounter

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    counter = TorchCounter("aot_eager")
    losses, _ = _train(program, mesh, lambda target: torch.compile(target, backend=counter))
    from torch._dynamo.utils import counters

    return {"graphs": counter.frame_count, "losses_equal": _equal(losses, expected[0], 1e-5, 1e-6),
            "graph_breaks": dict(counters["graph_break"])}


def _worker(rank: int, world: int, port: int, names: list[str], out_dir: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # several processes on a small shared machine: intra-op threads only contend
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results, references = {}, {}
        for name in names:
            program_name = name.split(":")[0]
            if program_name not in references:
                references[program_name] = _train(PROGRAMS[program_name], _mesh(PROGRAMS[program_name]))
            results[name] = _scenario(name, references[program_name])
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as file:
            json.dump(results, file)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_scenarios(names: list[str], world: int = 2) -> list[dict]:
    """Run the scenarios in `world` processes; per rank, the results by name."""
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_worker, args=(world, _free_port(), names, out_dir), nprocs=world)
        results = []
        for rank in range(world):
            with open(os.path.join(out_dir, f"rank{rank}.json")) as file:
                results.append(json.load(file))
        return results
