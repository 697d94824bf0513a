"""Pure NumPy workloads compiled with `inductor`: graphwright.compile vs torch.compile, and
plain NumPy (the `eager` side runs the function uncompiled).

Target (issue 19): graphwright's steady state at most 1.0x torch.compile's on the same function.

- `numpy/kmeans_step/inductor`: one k-means step on 10,000 points in 8 dimensions with 16
  centers (float64): squared distances to every center, nearest-center labels, each center
  moved to the mean of its points.
- `numpy/pairwise_distances/inductor`: the Euclidean distance matrix between 10,000 points
  and 256 queries (float64), through the `|a|^2 - 2ab + |b|^2` expansion.
"""
from __future__ import annotations

import numpy as np
import torch

from .harness import workload
from .timing import per_call

CALLS = 10
SIDES = ("graphwright", "pytorch", "eager")


def kmeans_step(points: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    distances = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=-1)
    labels = np.argmin(distances, axis=1)
    members = labels[:, None] == np.arange(len(centers))
    counts = members.sum(axis=0)
    moved = (members.T @ points) / np.maximum(counts, 1)[:, None]
    return np.where(counts[:, None] > 0, moved, centers), labels


def pairwise_distances(points: np.ndarray, queries: np.ndarray) -> np.ndarray:
    squared = (points ** 2).sum(axis=1)[:, None] - 2 * points @ queries.T + (queries ** 2).sum(axis=1)[None, :]
    return np.sqrt(np.maximum(squared, 0.0))


def _compiled(side: str, fn):
    if side == "graphwright":
        import graphwright

        return graphwright.compile(fn, backend="inductor", fullgraph=True)
    if side == "pytorch":
        return torch.compile(fn, backend="inductor", fullgraph=True)
    return fn


def _data(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    generator = np.random.default_rng(0)
    return [generator.standard_normal(shape) for shape in shapes]


@workload("numpy/kmeans_step/inductor", sides=SIDES)
def kmeans(side: str):
    """one k-means step, 10k points x 8 dims, 16 centers (float64), steady state"""
    points, centers = _data((10_000, 8), (16, 8))
    run = _compiled(side, kmeans_step)
    return lambda: per_call(lambda: run(points, centers), CALLS)


@workload("numpy/pairwise_distances/inductor", sides=SIDES)
def pairwise(side: str):
    """distance matrix 10k points x 256 queries, 16 dims (float64), steady state"""
    points, queries = _data((10_000, 16), (256, 16))
    run = _compiled(side, pairwise_distances)
    return lambda: per_call(lambda: run(points, queries), CALLS)
