"""Builtin containers in a compiled region, where the differential corpus cannot compare:
error messages (PyTorch's differ, so the corpus compares exception types), objects compared
by identity (dict keys, views, iterators), and inputs the corpus cannot snapshot (dicts keyed
by tensors, bounded deques, iterators). Each runs eagerly and compiled and compares."""
import collections
import types

import pytest
import torch

import graphwright


@pytest.fixture(autouse=True)
def _fresh():
    graphwright.reset()
    yield
    graphwright.reset()


def _compiled(fn):
    return graphwright.compile(fn, backend="eager", fullgraph=True)


def _messages(fn, *args):
    """What `fn` returns eagerly and compiled (it catches and returns error messages)."""
    return fn(*args), _compiled(fn)(*args)


def _caught(*attempts):
    messages = []
    for attempt in attempts:
        try:
            attempt()
        except Exception as error:  # noqa: BLE001 - the message is what is compared
            messages.append(f"{type(error).__name__}: {error}")
    return messages


def _scaled(x, scale=1):
    return x * scale


def test_container_errors_carry_cpythons_messages():
    def fn(x):
        return _caught(lambda: {}.update([(1, 2, 3)]), lambda: {}.update([1]), lambda: {}.update(1),
                       lambda: {}.update({}, {}), lambda: dict.fromkeys(), lambda: {}.pop(),
                       lambda: {}.popitem(), lambda: {[1]: 1}, lambda: {collections.OrderedDict()},
                       lambda: _scaled(x, **[1]), lambda: {**[1]}, lambda: _scaled(x, **{"scale": 1}, **{"scale": 2}),
                       lambda: set().pop(), lambda: {1}.remove(2), lambda: {1} | [2], lambda: {1} < [2],
                       lambda: {}.keys() < 1, lambda: {}.keys()[0], lambda: collections.deque().pop(),
                       lambda: collections.deque([1])[0:1], lambda: collections.deque([1], maxlen=1).insert(0, 2),
                       lambda: types.MappingProxyType({})["a"], lambda: x + len(iter(3)))

    eager, compiled = _messages(fn, torch.ones(2))
    assert compiled == eager
    assert "dictionary update sequence element #0 has length 3; 2 is required" in eager[0]


def test_deque_rotation_and_a_bound_deque_passed_in():
    def fn(x, queue):
        queue.appendleft(x)
        queue.rotate(-1)
        queue.extend([1, 2])
        queue.rotate(2)
        return queue.popleft(), queue.maxlen

    def run(run_fn):
        queue = collections.deque(["a", "b"], maxlen=4)
        return run_fn(torch.ones(2), queue), list(queue)

    assert repr(run(_compiled(fn))) == repr(run(fn))


def test_mappingproxy_refuses_writes_and_unions_like_its_dict():
    def fn(x):
        proxy = types.MappingProxyType({"a": 1})
        union = proxy | {"b": 2}
        reflected = {"c": 3} | proxy
        return union, reflected, proxy == {"a": 1}, _caught(lambda: proxy.__setitem__("e", 5)), x + 1

    def refused(x):
        proxy = types.MappingProxyType({"a": 1})
        try:
            proxy |= {"d": 4}
        except TypeError as error:
            return str(error), x + 1


    for program in (fn, refused):
        eager, compiled = program(torch.ones(2)), _compiled(program)(torch.ones(2))
        assert repr(compiled) == repr(eager)


def test_mappingproxy_of_a_closure_dict_stays_live_after_the_region():
    shared = {"a": 2}

    def fn(x):
        proxy = types.MappingProxyType(shared)
        shared["b"] = 3
        return proxy, x * proxy["a"]

    proxy, _ = _compiled(fn)(torch.ones(2))
    assert type(proxy) is types.MappingProxyType and dict(proxy) == {"a": 2, "b": 3}
    shared["c"] = 4
    assert proxy["c"] == 4


def test_views_leaving_the_region_view_the_dict_they_were_made_from():
    def fn(x):
        d = {"a": x, "b": 1}
        return d, d.keys(), d.values(), d.items()

    d, keys, values, items = _compiled(fn)(torch.ones(2))
    assert (type(keys), type(values), type(items)) == (type({}.keys()), type({}.values()), type({}.items()))
    d["c"] = 2
    assert list(keys) == ["a", "b", "c"] and list(values)[1:] == [1, 2] and len(items) == 3


def test_objects_used_as_keys_leave_the_region_as_themselves():
    class Token:
        pass

    def fn(x):
        token = Token()
        return token, {token: x}, {token}

    token, table, members = _compiled(fn)(torch.ones(2))
    assert list(table) == [token] and members == {token}


def test_dict_keyed_by_tensors_passed_in_is_read_stored_and_replayed():
    weight, bias = torch.randn(2), torch.randn(2)

    def fn(x, table):
        table[bias] = "b"
        table["lr"] = 0.5
        total = sum(key.sum() for key in table if isinstance(key, torch.Tensor))
        return x + total, len(table), [value for value in table.values()]

    table, expected = {weight: "w"}, {weight: "w"}
    eager = fn(torch.ones(2), expected)
    compiled = _compiled(fn)(torch.ones(2), table)
    assert torch.equal(compiled[0], eager[0]) and compiled[1:] == eager[1:]
    assert list(table) == [weight, bias, "lr"] and list(table.values()) == ["w", "b", 0.5]


def test_dict_keyed_by_tensors_recompiles_when_its_keys_change():
    counter = graphwright.testing.CompileCounter()
    compiled = graphwright.compile(lambda x, table: x + len(table), backend=counter, fullgraph=True)
    first, second = torch.randn(2), torch.randn(2)
    compiled(torch.ones(2), {first: 1})
    compiled(torch.ones(2), {first: 1})
    assert counter.frame_count == 1
    compiled(torch.ones(2), {second: 1})
    assert counter.frame_count == 2


def test_iterators_passed_in_are_stepped_after_the_graph():
    def fn(x, letters, pairs):
        return x + len(next(letters)), next(pairs), next(letters)

    letters, pairs = iter("xyz"), iter(((1, 2), (3, 4)))
    _compiled(fn)(torch.ones(1), letters, pairs)
    assert list(letters) == ["z"] and list(pairs) == [(3, 4)]


def test_instance_fromkeys_and_reflected_union_use_their_own_class():
    def fn(x):
        plain, ordered = {"a": 1}, collections.OrderedDict(b=2)
        return (type(plain.fromkeys("ab")).__name__, type(ordered.fromkeys("ab")).__name__,
                type(ordered.__ror__(plain)).__name__, type(dict.__or__(plain, ordered)).__name__, x + 1)

    eager, compiled = fn(torch.ones(1)), _compiled(fn)(torch.ones(1))
    assert compiled[:4] == eager[:4] == ("dict", "OrderedDict", "OrderedDict", "dict")


def test_a_deque_changed_while_iterated_raises_as_cpythons_does():
    # not in the corpus: TorchDynamo loops forever on this program
    def fn(x):
        numbers = collections.deque([1, 2, 3])
        seen = []
        try:
            for number in numbers:
                seen.append(number)
                numbers.append(number)
        except RuntimeError as error:
            seen.append(str(error))
        numbers[0] = 5  # storing an item is no change to CPython's deque
        return x + len(numbers), seen, [number for number in numbers]

    eager, compiled = _messages(fn, torch.ones(2))
    assert eager[1:] == compiled[1:] and torch.equal(eager[0], compiled[0])
    assert eager[1] == [1, "deque mutated during iteration"]
