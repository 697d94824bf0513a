"""The sweep's data: how many samples per op, which ops compare metadata only, which ops
make the fast slice that `make test` runs, and the known failures (xfail) with the mechanism
behind each."""
from __future__ import annotations

MAX_SAMPLES = 8
"""Samples per op for the forward check, evenly spread over the op's list (some ops have
hundreds; their later samples vary the same arguments)."""

MAX_VARIANT_SAMPLES = 3
"""Samples per op for each out= and in-place check."""

METADATA_ONLY = {
    # Uninitialized memory: only dtype, sizes and strides mean anything.
    "empty": "uninitialized values",
    "empty_like": "uninitialized values",
    "empty_strided": "uninitialized values",
    "empty_permuted": "uninitialized values",
    "new_empty": "uninitialized values",
    "new_empty_strided": "uninitialized values",
}
"""Ops whose values are not defined by their inputs: compared by dtype, sizes, strides and
storage offset only, as PyTorch's own consistency tests skip their values."""

XFAIL: dict[tuple[str, str], str] = {}
"""(op id, backend) -> the mechanism that makes it fail; the test expects the failure."""

FAST_SLICE = (
    # every 25th op of op_db by id (a fixed, deterministic spread over the whole database)
    "H", "add", "asin", "bucketize", "contiguous", "div.trunc_rounding", "fft.fftn", "floor",
    "hstack", "istft", "linalg.inv", "linalg.solve_triangular", "logit", "masked.softmax",
    "movedim", "new_zeros", "nn.functional.cosine_embedding_loss",
    "nn.functional.instance_norm", "nn.functional.max_unpool2d.grad", "nn.functional.rms_norm",
    "norm.nuc", "rand_like", "rsub", "signal.windows.kaiser",
    "special.hermite_polynomial_he", "split_with_sizes", "tensordot", "unfold", "zeros",
    # ops whose failures were fixed (each fix also has its own test)
    "scatter", "split_with_sizes_copy", "histogramdd", "nonzero",
    "nn.functional.triplet_margin_with_distance_loss", "narrow_copy", "_native_batch_norm_legit",
    "linalg.matrix_rank", "tensor_split",
)
"""The ops `make test` sweeps (`GW_OPINFO=all` sweeps every op)."""

INDUCTOR_SAMPLES = 2
"""Samples per op under inductor (each compiles C++ kernels)."""
