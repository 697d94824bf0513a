"""A library's own `is_compiling()` helper, spelled as transformers spells its
`is_torchdynamo_compiling`: torch is imported in its body and this module has no torch global,
so the helper's frame holds nothing of torch's (TorchDynamo's frame hook skips such a frame
when plain Python calls it)."""


def is_compiling():
    try:
        import torch

        return torch.compiler.is_compiling()
    except Exception:
        return False
