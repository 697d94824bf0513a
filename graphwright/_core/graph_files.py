"""A `torch.fx.GraphModule` written as a folder that Python imports and runs.

`GraphModule.to_folder` writes the module's code, state and submodules, but
not the globals its code refers to beyond torch's own (`torch`, `inf`, ...):
a graph calling graphwright's `nonstrict_trace` helper or a user's function
would not run once loaded. `write_loadable` adds them to the folder's
`module.py`: an object importable by its module and qualified name is
imported, any other is pickled into `globals.pt` next to it.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

import torch
from torch.fx.graph import _custom_builtins  # the names to_folder's module.py defines itself

_RESOLVE = '''
def _resolve(module, qualname):
    import importlib
    value = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value
'''


def write_loadable(gm: torch.fx.GraphModule, folder: str) -> None:
    """Write `gm` to `folder`: `module.py` defines class `GraphModule` (raises when a global cannot
    be imported nor pickled)."""
    gm.to_folder(folder, "GraphModule")
    extra = {name: value for name, value in gm.graph.python_code("self").globals.items()
             if name not in _custom_builtins}
    if not extra:
        return
    lines, pickled = [_RESOLVE], {}
    for name, value in extra.items():
        where = _import_path(value)
        if where is None:
            pickled[name] = value
        else:
            lines.append(f"{name} = _resolve({where[0]!r}, {where[1]!r})")
    if pickled:
        path = os.path.join(folder, "globals.pt")
        torch.save(pickled, path)
        lines.append(f"globals().update(torch.load(r'{path}', weights_only=False))")
    module_py = os.path.join(folder, "module.py")
    with open(module_py) as file:
        text = file.read()
    head, marker, tail = text.partition("from torch.nn import *\n")
    with open(module_py, "w") as file:
        file.write(head + marker + "\n".join(lines) + "\n" + tail)


def _import_path(value: Any) -> tuple[str, str] | None:
    """(module, qualified name) that import `value` itself, or None."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:
        return None
    return (module, qualname) if found is value else None
