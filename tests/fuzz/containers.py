"""Containers made in the region: lists, tuples, dicts and sizes, and the ways they are used.

Each statement builds a container of tensors of one shape, uses it one way (stacking,
summing, indexing, iterating, appending, popping, comprehensions, unpacking, dict views)
and leaves one new tensor variable in scope. The container itself stays a local of `f`:
containers that outlive the call are `side_effects`.
"""
from __future__ import annotations

from .builder import Builder
from .expressions import expression, promoted, some_shape
from .shapes import dim_product


def _items(b: Builder, count: int):
    shape = some_shape(b)
    items = [expression(b, shape, b.integer(0, 2)) for _ in range(count)]
    return shape, items, promoted(*(item.dtype for item in items)), any(item.grad for item in items)


def tensor_list(b: Builder) -> None:
    shape, items, dtype, grad = _items(b, b.integer(2, 3))
    name = b.fresh("items")
    b.emit(f"{name} = [{', '.join(item.code for item in items)}]")
    uses = ["sum", "index", "loop", "append", "comprehension", "pop", "stack", "reversed", "zip",
            "extend", "slice", "len"]
    if shape:
        uses.append("cat")
    use = b.choice(uses)
    b.feature(f"list_{use}")
    result = b.fresh("v")
    out_shape = shape
    if use == "sum":
        b.emit(f"{result} = sum({name})")
    elif use == "index":
        b.emit(f"{result} = {name}[0] * {name}[-1]")
        dtype = promoted(items[0].dtype, items[-1].dtype)
    elif use == "loop":
        item = b.fresh("t")
        b.emit(f"{result} = {name}[0]")
        b.emit(f"for {item} in {name}[1:]:")
        b.emit(f"    {result} = {result} + {item}.sin()")
    elif use == "append":
        extra = expression(b, shape, b.integer(0, 1))
        dtype, grad = promoted(items[0].dtype, extra.dtype), grad or extra.grad
        b.emit(f"{name}.append({extra.code})")
        b.emit(f"{result} = {name}[len({name}) - 1] + {name}[0]")
    elif use == "comprehension":
        item, index = b.fresh("t"), b.fresh("j")
        b.emit(f"{result} = sum([{item} * ({index} + 1) for {index}, {item} in enumerate({name})])")
    elif use == "pop":
        last = b.fresh("last")
        b.emit(f"{last} = {name}.pop()")
        b.emit(f"{result} = {last} - {name}[0] * len({name})")
        dtype = promoted(items[0].dtype, items[-1].dtype)
    elif use == "stack":
        dim = b.choice([0, -1])
        b.emit(f"{result} = torch.stack({name}, dim={dim})")
        out_shape = (len(items),) + shape if dim == 0 else shape + (len(items),)
    elif use == "reversed":
        b.emit(f"{result} = torch.stack(list(reversed({name})))")
        out_shape = (len(items),) + shape
    elif use == "zip":
        first, second = b.fresh("p"), b.fresh("q")
        b.emit(f"{result} = sum({first} * {second} for {first}, {second} in zip({name}, {name}[1:]))")
    elif use == "extend":
        b.emit(f"{name}.extend([{name}[0] * 2, {name}[-1]])")
        b.emit(f"{result} = {name}[-2] + {name}[len({name}) // 2]")
        dtype = promoted(items[0].dtype, (items + items[:1])[2].dtype)  # [-2] is items[0] * 2
    elif use == "slice":
        b.emit(f"{result} = sum({name}[::2]) - sum({name}[1:])")
    elif use == "len":
        b.emit(f"{result} = {name}[0] * len({name}) + {name}[1]")
        dtype = promoted(items[0].dtype, items[1].dtype)
    else:
        b.emit(f"{result} = torch.cat({name}, dim=0)")
        out_shape = (dim_product((len(items), shape[0])),) + shape[1:]
    b.add_tensor(result, out_shape, dtype, grad)
    b.feature("list")


def tensor_tuple(b: Builder) -> None:
    shape, items, dtype, grad = _items(b, b.integer(2, 3))
    name = b.fresh("pair")
    b.emit(f"{name} = ({', '.join(item.code for item in items)},)")
    use = b.choice(["unpack", "index", "swap", "starred", "concat"])
    result = b.fresh("v")
    first, second = b.fresh("a"), b.fresh("b")
    if use == "unpack":
        rest = ", ".join(b.fresh("c") for _ in items[2:])
        b.emit(f"{first}, {second}{', ' + rest if rest else ''} = {name}")
        b.emit(f"{result} = {first} - {second}")
        dtype = promoted(items[0].dtype, items[1].dtype)
    elif use == "index":
        b.emit(f"{result} = {name}[1] * {name}[0] + {name}[-1]")
    elif use == "swap":
        b.emit(f"{first}, {second} = {name}[0], {name}[1]")
        b.emit(f"{first}, {second} = {second}, {first} * 2")
        b.emit(f"{result} = {first} - {second}")
        dtype = promoted(items[0].dtype, items[1].dtype)
    elif use == "starred":
        b.emit(f"{first}, *{second} = {name}")
        b.emit(f"{result} = {first} + {second}[-1] * len({second})")
        dtype = promoted(items[0].dtype, items[-1].dtype)
    else:
        b.emit(f"{result} = sum(({name} + ({name}[0],))[1:])")
    b.add_tensor(result, shape, dtype, grad)
    b.feature(f"tuple_{use}")
    b.feature("tuple")


def tensor_dict(b: Builder) -> None:
    shape, items, dtype, grad = _items(b, 2)
    name = b.fresh("d")
    b.emit(f'{name} = {{"a": {items[0].code}, "b": {items[1].code}}}')
    use = b.choice(["index", "setitem", "items", "get", "values", "comprehension", "update", "pop", "in",
                    "keys"])
    result = b.fresh("v")
    if use == "index":
        b.emit(f'{result} = {name}["a"] + {name}["b"]')
    elif use == "setitem":
        b.emit(f'{name}["c"] = {name}["a"] * 2')
        b.emit(f'{result} = {name}["c"] - {name}["b"] * len({name})')
    elif use == "items":
        key, value = b.fresh("key"), b.fresh("val")
        b.emit(f'{result} = {name}["a"]')
        b.emit(f"for {key}, {value} in {name}.items():")
        b.emit(f"    {result} = {result} + {value}.cos() * len({key})")
    elif use == "get":
        b.emit(f'{result} = {name}.get("z", {name}["a"]) + {name}.get("b")')
    elif use == "values":
        b.emit(f"{result} = sum({name}.values())")
    elif use == "comprehension":
        key, value = b.fresh("key"), b.fresh("val")
        b.emit(f'{result} = {{{key}: {value}.sin() for {key}, {value} in {name}.items()}}["b"]')
        dtype = items[1].dtype
    elif use == "update":
        b.emit(f'{name}.update({{"b": {name}["a"] * 0.5, "e": {name}["b"]}})')
        b.emit(f'{result} = {name}["b"] + {name}["e"]')
    elif use == "pop":
        b.emit(f'{result} = {name}.pop("a") + {name}["b"] * len({name})')
    elif use == "in":
        b.emit(f'{result} = {name}["a"] if "a" in {name} else {name}["b"]')
        dtype = items[0].dtype
    else:
        b.emit(f'{result} = {name}[sorted({name}.keys())[-1]] * 2')
        dtype = items[1].dtype
    b.add_tensor(result, shape, dtype, grad)
    b.feature(f"dict_{use}")
    b.feature("dict")


def size_values(b: Builder) -> None:
    """Sizes as Python values: a list of them, a `torch.Size`, arithmetic on them."""
    var = b.choice(b.tensors)
    name = var.name
    shape = var.shape
    result = b.fresh("v")
    template = b.choice([
        "{v}.reshape(list({v}.shape))", "{v}.view({v}.shape)", "{v}.new_zeros({v}.shape) + {v}",
        "torch.zeros({v}.size(), dtype={v}.dtype) + {v}", "{v}.expand({v}.size())",
        "{v} * len({v}.shape)", "{v}.reshape(tuple(s for s in {v}.shape))",
        "torch.ones_like({v}) * {v}.numel()", "{v}.new_ones(()) * {v}.dim() + {v}",
    ])
    b.read(var)
    b.emit(f"{result} = {template.format(v=name)}")
    b.add_tensor(result, shape, var.dtype, var.grad)
    b.feature("sizes")
