"""Tensor subclasses written the way users write them, shared by the subclass tests.

- `ScaledTensor`: a `_make_wrapper_subclass` wrapper holding `data` with a constant
  `scale` in its flatten context (the pattern of scaled/quantized tensors): its
  `__torch_dispatch__` unwraps to `data * scale`, computes, and rewraps floating
  results with the first operand's scale. A traceable wrapper subclass.
- `LabelledTensor`: a wrapper whose flatten context holds a label its computation ignores and
  a version that matters; its `__metadata_guard__` says so (a graph serves any label).
- `RowScaledTensor`: a wrapper holding `data` (rows x columns) and a per-row `scale` vector,
  an inner tensor of another rank than the subclass (whose sizes are its own symbols).
- `OpaqueWrapper`: a wrapper with a `__torch_dispatch__` but no `__tensor_flatten__`:
  not traceable, refused by AOT autograd.
- `LoggedTensor`: a `__torch_function__`-only subclass that records what ran on it, then
  defers to torch's default hook (`super()`).
- `RoundedTensor`: a `__torch_function__`-only subclass that computes with the hook off and
  rounds floating results (its own semantics, which a compiled graph must keep).
- `TaggedTensor`: a plain Python subclass.
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree


class ScaledTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, data, scale, outer_size=None, outer_stride=None):
        return torch.Tensor._make_wrapper_subclass(
            cls, data.shape if outer_size is None else outer_size,
            strides=data.stride() if outer_stride is None else outer_stride,
            dtype=data.dtype, device=data.device, requires_grad=data.requires_grad)

    def __init__(self, data, scale, outer_size=None, outer_stride=None):
        self.data_ = data
        self.scale = scale

    def __repr__(self):
        return f"ScaledTensor({self.data_!r}, scale={self.scale})"

    def __tensor_flatten__(self):
        return ["data_"], {"scale": self.scale}

    @staticmethod
    def __tensor_unflatten__(inner, context, outer_size, outer_stride):
        return ScaledTensor(inner["data_"], context["scale"], outer_size, outer_stride)

    def dequantize(self):
        return self.data_ * self.scale

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        scale = next(t.scale for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, ScaledTensor))
        args, kwargs = pytree.tree_map_only(ScaledTensor, lambda t: t.data_ * t.scale, (args, kwargs))
        out = func(*args, **kwargs)
        return pytree.tree_map_only(
            torch.Tensor, lambda t: ScaledTensor(t / scale, scale) if t.is_floating_point() else t, out)


class LabelledTensor(torch.Tensor):
    """A wrapper whose flatten context holds a label that its computation ignores and a version
    that matters: its `__metadata_guard__` lets a graph serve any label of the same version."""

    @staticmethod
    def __new__(cls, data, label, version):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(), dtype=data.dtype,
                                                   device=data.device, requires_grad=data.requires_grad)

    def __init__(self, data, label, version):
        self.data_, self.label, self.version = data, label, version

    def __tensor_flatten__(self):
        return ["data_"], (self.label, self.version)

    @classmethod
    def __tensor_unflatten__(cls, inner, context, outer_size, outer_stride):
        return cls(inner["data_"], *context)

    @classmethod
    def __metadata_guard__(cls, compiled, context):
        return compiled[1] == context[1]

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        first = next(t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, LabelledTensor))
        args, kwargs = pytree.tree_map_only(LabelledTensor, lambda t: t.data_ * t.version, (args, kwargs or {}))
        return pytree.tree_map_only(torch.Tensor, lambda t: cls(t, first.label, first.version), func(*args, **kwargs))


class RowScaledTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, strides=data.stride(), dtype=data.dtype,
                                                   device=data.device, requires_grad=data.requires_grad)

    def __init__(self, data, scale):
        self.data_, self.scale = data, scale

    def __tensor_flatten__(self):
        return ["data_", "scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, context, outer_size, outer_stride):
        return RowScaledTensor(inner["data_"], inner["scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        args, kwargs = pytree.tree_map_only(RowScaledTensor, lambda t: t.data_ * t.scale[:, None],
                                            (args, kwargs or {}))
        out = func(*args, **kwargs)
        return pytree.tree_map_only(
            torch.Tensor, lambda t: RowScaledTensor(t, torch.ones(t.shape[0])) if t.dim() == 2 else t, out)


class OpaqueWrapper(torch.Tensor):
    """Holds `elem`; every op runs on it and the result is wrapped again."""

    @staticmethod
    def __new__(cls, elem):
        wrapper = torch.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(), dtype=elem.dtype,
                                                      device=elem.device, requires_grad=elem.requires_grad)
        wrapper.elem = elem
        return wrapper

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        args, kwargs = pytree.tree_map_only(OpaqueWrapper, lambda t: t.elem, (args, kwargs or {}))
        return pytree.tree_map_only(torch.Tensor, OpaqueWrapper, func(*args, **kwargs))


class LoggedTensor(torch.Tensor):
    calls: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


class RoundedTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            return out.round(decimals=1).as_subclass(cls)
        return out


class TaggedTensor(torch.Tensor):
    pass


def scaled(*shape, scale=2.0, requires_grad=False):
    return ScaledTensor(torch.randn(*shape), scale).requires_grad_(requires_grad)
