"""NumPy code compiled by graphwright: a k-means step written in NumPy becomes one graph.

1. The arrays are graph inputs; every NumPy operation is a tensor operation of the graph
   (printed below), and the results come back as NumPy arrays, equal to NumPy's own.
2. The same function compiled with `inductor` runs as generated kernels.
3. A NumPy call with no tensor counterpart (`np.random`) breaks the graph with a clear
   reason; without fullgraph the function still gives eager's result.
"""
import numpy as np
import torch

import graphwright


def section(title: str) -> None:
    print(f"\n--- {title} ---")


def show_graph(gm: torch.fx.GraphModule, example_inputs: list):
    print(gm.code.strip())
    return gm.forward


def kmeans_step(points, centers):
    distances = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=-1)
    labels = np.argmin(distances, axis=1)
    members = labels[:, None] == np.arange(len(centers))
    counts = members.sum(axis=0)
    moved = (members.T @ points) / np.maximum(counts, 1)[:, None]
    return np.where(counts[:, None] > 0, moved, centers), labels


generator = np.random.default_rng(0)
points, centers = generator.standard_normal((1000, 2)), generator.standard_normal((4, 2))

section("1. One graph of tensor operations; NumPy arrays in and out")
compiled = graphwright.compile(kmeans_step, backend=show_graph, fullgraph=True)
new_centers, labels = compiled(points, centers)
expected_centers, expected_labels = kmeans_step(points, centers)
print(type(new_centers).__name__, new_centers.dtype, labels.dtype)
print("same as NumPy:", np.allclose(new_centers, expected_centers) and (labels == expected_labels).all())

section("2. The same function through Inductor")
fast = graphwright.compile(kmeans_step, backend="inductor", fullgraph=True)
for _ in range(3):
    centers, _ = fast(points, centers)
print("centers after three steps:\n", centers)

section("3. np.random breaks the graph")


def noisy(points):
    return points + np.random.default_rng(1).normal(size=points.shape)


try:
    graphwright.compile(noisy, backend="eager", fullgraph=True)(points)
except graphwright.Unsupported as error:
    print(str(error).splitlines()[0])
    print(str(error).splitlines()[1])
print("without fullgraph, eager's result:",
      np.allclose(graphwright.compile(noisy, backend="eager")(points), noisy(points)))
