"""Identity of objects made in the compiled region, as it shows after the region.

While tracing, an object made in the region has no address yet; its `id()` stands for it
(equal exactly where `is` holds, distinct from every live object's) and is rebuilt after the
graph as `id()` of the object the program is handed back. A dict the program holds as such
an object's `__dict__` (read, or assigned to it) is that object's `__dict__` afterwards too.
"""
import torch

import graphwright


class Node:
    pass


def test_ids_that_leave_the_region_name_the_objects_handed_back():
    def fn(x):
        node, y = Node(), x * 2

        def helper():
            return 1

        held = [node, y, helper]
        return held, [id(node), id(y), id(helper)], id(node) == id(held[0])

    held, ids, same = graphwright.compile(fn, fullgraph=True)(torch.ones(2))
    assert [id(item) for item in held] == ids
    assert same is True
    eager_held, _, eager_same = fn(torch.ones(2))
    assert eager_same is same and [type(item) for item in eager_held] == [type(item) for item in held]


def test_ids_inside_the_region_are_equal_exactly_where_is_holds():
    def fn(x, outside):
        first, second = Node(), Node()
        alias = first
        ids = [id(first), id(second), id(alias), id(outside), id([]), id(x)]
        return x + 1, ids[0] == ids[2], len(set(ids[:4])), ids[3] == id(outside), id(x) == ids[5]

    outside = Node()
    eager = fn(torch.ones(2), outside)
    compiled = graphwright.compile(fn, fullgraph=True)(torch.ones(2), outside)
    assert torch.equal(eager[0], compiled[0])
    assert compiled[1:] == eager[1:] == (True, 3, True, True)


def test_a_dict_assigned_as_dunder_dict_stays_the_objects_dict_after_the_region():
    def fn(x):
        node, table = Node(), {"z": x}
        node.old = 1
        node.__dict__ = table
        node.q = x + 1
        table["w"] = 5
        read = Node()
        read.a = 2
        return node, table, read, read.__dict__, sorted(vars(node)), hasattr(node, "old")

    node, table, read, read_dict, names, had_old = graphwright.compile(fn, fullgraph=True)(torch.ones(2))
    assert node.__dict__ is table and read.__dict__ is read_dict
    assert (names, had_old) == (["q", "w", "z"], False) == tuple(fn(torch.ones(2))[4:])
    assert torch.equal(node.q, torch.full((2,), 2.0)) and node.w == 5
