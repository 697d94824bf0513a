"""`id()` of objects made in the compiled region.

While tracing, an object made in the region has no address yet; the id stands for it (equal
exactly where `is` holds, distinct from every live object's) and is rebuilt after the graph
as `id()` of the object the program is handed back, so that an id that leaves the region
names that object.
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
