"""Rebuilding Python values after the graph, and replaying side effects.

After the graph runs, the entry must hand back real Python values for what
the traced code produced: the return value, and at a graph break the live
stack and locals. `ResidualWriter.rebuild` turns a symbolic value into an
expression: tensors the graph computed are its outputs, values read from
outside are re-read by source, constants are literals, and containers,
functions and objects created while tracing are built anew. A value built
anew is built once, into a `___rN` variable, so that two places holding the
same list still hold the same list; an instance of a user class is made
empty by its builtin base and then given its items and attributes without
running the user's code. `replay_lines` writes the side effects (stores on
instances of user classes straight into their own state, or into the `__dict__`
where a descriptor would take a plain store: their class's `__setattr__` and
descriptors ran in the trace).
"""
from __future__ import annotations

import collections
import functools
import types
import warnings
import weakref
from typing import Any, Callable

import torch

from ..._core.subclass_protocol import is_wrapper_subclass
from ..guards.codegen import EntryWriter
from ..interpreter import graph_breaks as gb
from ..interpreter.contexts import remade_grad_mode
from ..interpreter.frame import UnreadArgument
from ..interpreter.symbolic_sizes import holds_symbol
from ..objects.class_creation import MadeClass, made_class, make_class
from ..objects.classes import builtin_base, instance_dict_of, is_instance_value, is_user_class
from ..objects.dict_views import kind_of, view_base
from ..objects.exceptions import make_real
from ..objects.instances import fill, make_empty, store_own
from ..objects.sets import keys_in_order, new_set
from ..objects.text import FormattedText
from ..objects.values import (
    NULL,
    ArrayValue,
    CellValue,
    ConstantValue,
    ContextValue,
    DequeValue,
    DescriptorValue,
    DictValue,
    DictViewValue,
    ExceptionValue,
    FunctionValue,
    GeneratorValue,
    IteratorValue,
    LazyIteratorValue,
    MethodValue,
    ModuleValue,
    ObjectIdentity,
    ObjectValue,
    PartialValue,
    ScalarInstanceValue,
    SequenceValue,
    SliceValue,
    StorageValue,
    TensorValue,
    Value,
    ValueKey,
    holds_value_keys,
)
from .liveness import live_locals
from .resume import NULL_SLOT, SENT_SLOT, VALUE_SLOT, ResumeLayout, resume_code
from .side_effects import SideEffects

_LITERAL_TYPES = (int, str, bool, type(None))


def _refill(container: Any, new: Any, base: type) -> None:
    """Replace the items of an instance of a dict, set or list subclass through its builtin base."""
    if base is list:
        list.__setitem__(container, slice(None), new)
        return
    base.clear(container)
    if base is set:
        set.update(container, new)
        return
    for key, value in new.items():
        base.__setitem__(container, key, value)


def _make_function(code: types.CodeType, f_globals: dict, defaults: tuple, kwdefaults: dict | None,
                   closure: tuple, attributes: dict | None = None) -> types.FunctionType:
    function = types.FunctionType(code, f_globals, code.co_name, defaults or None, closure or None)
    function.__kwdefaults__ = kwdefaults
    for name, value in (attributes or {}).items():  # stored in the region (functools.wraps...)
        setattr(function, name, value)
    return function


def _finished() -> Any:
    """A generator function whose generators are exhausted at once: a finished generator."""
    return
    yield


def _remove_own_attribute(obj: Any, name: str) -> None:
    try:
        object.__delattr__(obj, name)
    except AttributeError:
        pass


def _shadowed(owner: Value, name: str) -> bool:
    """Whether a data descriptor of the owner's class (a property that reads the `__dict__`)
    would take a store to `name` that the region made straight into the object's state."""
    found = next((klass.__dict__[name] for klass in owner.python_type().__mro__ if name in klass.__dict__), None)
    kind = type(found)
    return kind is not types.MemberDescriptorType and (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))


def list_iterator_at(items: list, position: int) -> Any:
    """CPython's iterator over the list `items` (the list itself, which the program may still
    change), `position` items in."""
    iterator = list.__iter__(items)
    iterator.__setstate__(position)
    return iterator


def _advance(iterator: Any, steps: int) -> None:
    for _ in range(steps):
        next(iterator)


def _replace_contents(container: Any, new: Any) -> None:
    """Give a dict, set or deque from outside the items the region left it with."""
    container.clear()
    if type(container) is collections.deque:
        container.extend(new)
    else:
        container.update(new)


class ResidualWriter(EntryWriter):
    """The body of an entry after its guards: `reads`, the graph call, `rebuilt`, replays, tail.

    `on_break(kind, debug_context, **details)` makes the exception raised when a value
    cannot be rebuilt."""

    def __init__(self, code: types.CodeType, on_break: Callable[..., Exception]) -> None:
        super().__init__(code)
        self.namespace.update({"___delattr": delattr, "___iter": iter, "___new_instance": make_empty,
                               "___fill": fill, "___refill": _refill, "___setattr": object.__setattr__,
                               "___instance_dict": instance_dict_of,
                               "___store_own": store_own,
                               "___remove_own_attribute": _remove_own_attribute,
                               "___replace_contents": _replace_contents, "___make_function": _make_function,
                               "___make_exception": make_real, "___make_class": make_class,
                               "___type_setattr": type.__setattr__, "___type_delattr": type.__delattr__,
                               "___advance": _advance})
        self.outputs: list[Value] = []
        self.rebuilt: list[str] = []
        self.rebuilt_tensor = False
        self._on_break = on_break
        self._output_index: dict[int, int] = {}
        self._built: dict[int, tuple[Value, str]] = {}
        self._unassigned: dict[str, list[str]] = {}  # named, being made: the lines that wait for it

    def _with_class(self, cls: type, output: str) -> str:
        """A graph output as an instance of `cls`: made by `Tensor._make_subclass` in the region (an
        nn.Parameter: `__torch_function__` disabled), or the result of an operation on a Python
        subclass, which the graph computes as a plain tensor (a code generator returns one) and
        torch's default `__torch_function__` returns as the subclass, still in autograd's graph."""
        if cls.__torch_function__ is torch._C._disabled_torch_function_impl:
            return f"{self.ref(torch.Tensor._make_subclass)}({self.class_ref(cls)}, {output}, False)"
        return f"{self.ref(as_class)}({output}, {self.class_ref(cls)})"

    def rebuild(self, value: Value) -> str:
        """An expression for `value` after the graph has run (`___out` holds its outputs)."""
        if type(value) is UnreadArgument:
            return self.expr(value.source)
        if isinstance(value, TensorValue):
            self.rebuilt_tensor = True
            if value.source is not None:
                return self.expr(value.source)
            index = self._output_index.get(id(value))
            if index is None:
                index = self._output_index[id(value)] = len(self.outputs)
                self.outputs.append(value)
                made = f"___out[{index}]"
                if value.cls is not torch.Tensor and not is_wrapper_subclass(value.fake):
                    # a wrapper subclass (TwoTensor) is one in the graph already
                    made = f"___r{len(self._built)}"
                    self._built[id(value)] = (value, made)
                    self.rebuilt.append(f"{made} = {self._with_class(value.cls, f'___out[{index}]')}")
                for name, item in (value.overlay or {}).items():  # attributes the region stored on it
                    self.rebuilt.append(f"___setattr({made}, {name!r}, {self.rebuild(item)})")
            known = self._built.get(id(value))
            return f"___out[{index}]" if known is None else known[1]
        if isinstance(value, FormattedText) and value.parts is not None:
            return self._format(value)
        if isinstance(value, ObjectIdentity):
            return f"{value.function.__name__}({self.rebuild(value.of)})"
        if isinstance(value, ConstantValue) and holds_symbol(value.value):
            if value.source is not None:
                return self.expr(value.source)  # a symbolic input, unchanged: read it again
            return self._rebuild_symbolic(value)
        if isinstance(value, ConstantValue) and type(value.value) is weakref.ref and value.source is not None:
            return self.expr(value.source)  # a reference made in the region to an object read by source
        if isinstance(value, ConstantValue):
            return self.literal(value.value)
        if value.source is not None and isinstance(value, (SequenceValue, DictValue, ModuleValue, ObjectValue,
                                                           PartialValue, ArrayValue,
                                                           IteratorValue)):
            return self.expr(value.source)
        if isinstance(value, DictViewValue):  # a view of the dict as it is after the graph
            return self._build_view(value)
        if isinstance(value, FunctionValue) and value.source is not None and value.bound_self is None:
            return self.expr(value.source)
        if isinstance(value, ModuleValue):
            return self.ref(value.module)
        if isinstance(value, StorageValue):  # the one storage object eager hands out for the tensor
            return f"{self.rebuild(value.tensor)}.untyped_storage()"
        known = self._built.get(id(value))
        if known is not None:
            return known[1]
        if isinstance(value, CellValue):
            return self._build_cell(value)
        if isinstance(value, ExceptionValue):
            return self._build_exception(value)
        if isinstance(value, ObjectValue) and value.obj is not None:
            return self.ref(value.obj)
        if is_instance_value(value) or isinstance(value, DictValue) and value.cls is not None \
                or isinstance(value, SequenceValue) and value.overlay:
            return self._build_instance(value)
        text = self._build(value)
        if isinstance(value, SequenceValue) and value.kind is tuple:
            return text  # immutable: no identity to keep
        built = f"___r{len(self._built)}"
        self._built[id(value)] = (value, built)  # the value is kept alive: its id stays its own
        self.rebuilt.append(f"{built} = {text}")
        return built

    def _build_view(self, view: DictViewValue) -> str:
        mapping = self.rebuild(view.mapping)
        if view.cls is types.MappingProxyType:
            return f"{self.ref(types.MappingProxyType)}({mapping})"
        return f"{self.ref(view_base(view.mapping))}.{kind_of(view)}({mapping})"

    def _build(self, value: Value) -> str:
        if isinstance(value, SliceValue):
            return f"slice{self.rebuild(value.parts)}"
        if isinstance(value, DequeValue):
            items = "".join(self.rebuild(item) + ", " for item in value.items)
            return f"{self.ref(collections.deque)}([{items}], {value.maxlen!r})"
        if isinstance(value, SequenceValue):
            items = "".join(self.rebuild(item) + ", " for item in value.items)
            if value.cls is not None:
                cls = self.class_ref(value.cls)
                return f"{cls}({items})" if hasattr(value.cls, "_fields") else f"{cls}(({items}))"
            return f"[{items}]" if value.kind is list else f"({items})"
        if isinstance(value, DictValue):
            if value.kind is not dict:
                return f"{self.ref(value.kind)}(({''.join(self.key(k) + ', ' for k in keys_in_order(value))}))"
            pairs = ", ".join(f"{self.key(key)}: {self.rebuild(item)}" for key, item in value.items.items())
            return "{" + pairs + "}"
        if isinstance(value, FunctionValue):
            return self._build_function(value)
        if isinstance(value, MethodValue) and not isinstance(value.receiver, ContextValue):
            return f"{self.rebuild(value.receiver)}.{value.name}"
        if isinstance(value, PartialValue):
            stored = "".join(self.rebuild(item) + ", " for item in [value.func, *value.args])
            keywords = ", ".join(f"{key!r}: {self.rebuild(item)}" for key, item in value.keywords.items())
            return f"{self.ref(functools.partial)}({stored}**{{{keywords}}})"
        if isinstance(value, IteratorValue) and value.over is not None:  # a list's, still reading it
            return f"{self.ref(list_iterator_at)}({self.rebuild(value.over)}, {value.position})"
        if isinstance(value, IteratorValue):
            return "___iter([" + "".join(self.rebuild(item) + ", " for item in value.items[value.position:]) + "])"
        if isinstance(value, DescriptorValue):
            parts = ", ".join(self.rebuild(part) for part in value.parts.values())
            return f"{self.ref(value.cls)}({parts})"
        if isinstance(value, ArrayValue):  # an array (or NumPy scalar) on the graph's tensor
            from ..objects import numpy_nodes  # torch._numpy, loaded once a program uses NumPy

            convert = numpy_nodes.as_scalar if value.scalar else numpy_nodes.as_array
            return f"{self.ref(convert)}({self.rebuild(value.tensor)})"
        if isinstance(value, GeneratorValue):
            return self._build_generator(value)
        if isinstance(value, LazyIteratorValue) and value.parts is not None and not value.done:
            made, inputs = value.parts
            return f"{self.ref(made)}({', '.join(self.rebuild(item) for item in inputs)})"
        if isinstance(value, ContextValue) and value.kind == "grad":
            (enabled,), cls = value.args, value.cls
            return f"{self.ref(remade_grad_mode)}({self.ref(cls)}, {enabled}, {self.literal(value.saved)})"
        if isinstance(value, ContextValue) and value.kind == "warnings" and value.saved is None:
            # made and never entered: a manager of the same options, for the caller to enter
            return f"{self.ref(warnings.catch_warnings)}(**{self.ref(value.args[0])})"
        raise self._on_break(gb.UNRECONSTRUCTIBLE_VALUE, f"rebuild {value!r}",
                             type=value.python_type().__name__)

    def _build_generator(self, generator: GeneratorValue) -> str:
        """A generator made in the region, suspended where the trace left it: its code resumed
        at that point (`resume_code`, a generator function itself) called on its live stack
        and locals and its cells; one that never started, from its first instruction."""
        frame = generator.frame
        if generator.done:
            return f"{self.ref(_finished)}()"
        if not (isinstance(generator.handled, ConstantValue) and generator.handled.value is None):
            raise self._on_break(gb.UNRECONSTRUCTIBLE_VALUE, f"rebuild {generator!r}",
                                 type="generator suspended inside an `except` block")
        code = frame.code
        if generator.started:
            offset, stack, slots = frame.instructions[frame.index].offset, frame.stack, [SENT_SLOT]
            cells = [frame.cells[name] for name in code.co_cellvars + code.co_freevars]
        else:
            first = next(index for index, inst in enumerate(frame.instructions) if inst.opname == "RESUME")
            offset, stack, slots = frame.instructions[first + 1].offset, [], []
            cells = [CellValue(frame.locals.get(name)) for name in code.co_cellvars] + list(frame.closure)
        arguments = []
        for item in stack:
            if item is NULL:
                slots.insert(len(slots) - bool(generator.started), NULL_SLOT)
                continue
            if isinstance(item, MethodValue) and isinstance(item.receiver, ContextValue):
                raise self._on_break(gb.UNRECONSTRUCTIBLE_VALUE, f"rebuild {generator!r}",
                                     type="generator suspended inside a `with` block of grad mode or autocast")
            slots.insert(len(slots) - bool(generator.started), VALUE_SLOT)
            arguments.append(self.rebuild(item))
        live_here = live_locals(code, offset)
        live = tuple(name for name in code.co_varnames if name in frame.locals and name in live_here)
        arguments += [self.rebuild(frame.locals[name]) for name in live]
        resumed = resume_code(code, offset, ResumeLayout(tuple(slots), live))
        closure = "(" + "".join(self.rebuild_cell(cell) + ", " for cell in cells) + ")"
        function = f"___make_function({self.ref(resumed)}, {self.ref(frame.globals)}, (), None, {closure})"
        return f"{function}({', '.join(arguments)})"

    def _build_instance(self, value: Value) -> str:
        """An instance of a user class (or of a dict subclass) made in the region: made empty by
        its builtin base first, so that its items and attributes may refer back to it."""
        cls = value.python_type()
        base = builtin_base(cls)
        items = "None"
        if isinstance(value, ScalarInstanceValue):  # a subclass of int or str: its value
            items = self.rebuild(value.builtin)
        elif base is tuple:
            items = "(" + "".join(self.rebuild(item) + ", " for item in value.items) + ")"
        elif base is frozenset:
            items = "(" + "".join(self.key(key) + ", " for key in keys_in_order(value)) + ")"
        built = f"___r{len(self._built)}"
        self._built[id(value)] = (value, built)
        self.rebuilt.append(f"{built} = ___new_instance({self.class_ref(cls)}, {self.ref(base)}, {items})")
        contents = "None"
        if isinstance(value, DictValue) and base is set:
            contents = f"{{{''.join(self.key(key) + ', ' for key in keys_in_order(value))}}}" if value.items \
                else f"{self.ref(set)}()"
        elif isinstance(value, DictValue) and base is not frozenset:
            contents = "{" + ", ".join(f"{self.key(key)}: {self.rebuild(item)}"
                                       for key, item in value.items.items()) + "}"
        elif isinstance(value, SequenceValue) and base is not tuple:
            contents = "[" + "".join(self.rebuild(item) + ", " for item in value.items) + "]"
        own_dict = getattr(value, "own_dict", None)
        if own_dict is not None:  # the dict the program holds is the object's `__dict__` itself
            self.rebuilt.append(f"___fill({built}, {self.ref(base)}, {contents}, {{}})")
            self.rebuilt.append(f"___setattr({built}, '__dict__', {self.rebuild(own_dict)})")
            return built
        state = ", ".join(f"{name!r}: {self.rebuild(item)}" for name, item in value.overlay.items()
                          if item is not None)
        self.rebuilt.append(f"___fill({built}, {self.ref(base)}, {contents}, {{{state}}})")
        return built

    def _build_exception(self, value: ExceptionValue) -> str:
        """An exception made in the region: made by its builtin base with its arguments, then
        given its chaining state and attributes (its traceback, the tracer's frames, is not)."""
        built = f"___r{len(self._built)}"
        self._built[id(value)] = (value, built)
        args = "(" + "".join(self.rebuild(arg) + ", " for arg in value.args) + ")"
        self.rebuilt.append(f"{built} = ___make_exception({self.class_ref(value.cls)}, {args})")
        for name, attribute in (("__cause__", value.cause), ("__context__", value.context)):
            if not (isinstance(attribute, ConstantValue) and attribute.value is None):
                self.rebuilt.append(f"{built}.{name} = {self.rebuild(attribute)}")
        state = ", ".join(f"{name!r}: {self.rebuild(item)}" for name, item in value.overlay.items()
                          if item is not None)
        self.rebuilt.append(f"___fill({built}, None, None, {{{state}}})")
        self.rebuilt.append(f"{built}.__suppress_context__ = {value.suppress_context}")
        return built

    def _format(self, text: FormattedText) -> str:
        """The text an f-string over symbolic numbers makes, from the numbers this call has."""
        pieces = []
        for part in text.parts:
            if type(part) is str:
                pieces.append(repr(part))
                continue
            number = self.rebuild(part.number)
            if part.conversion is not None:
                number = f"{self.ref(part.conversion)}({number})"
            pieces.append(f"{self.ref(format)}({number}, {part.spec!r})")
        return "(" + " + ".join(pieces) + ")" if pieces else "''"

    def _rebuild_symbolic(self, value: ConstantValue) -> str:
        """A symbolic size is a graph output; a Size or tuple holding some is rebuilt around them."""
        if isinstance(value.value, (tuple, list)):
            items = "".join(self.rebuild(ConstantValue(item)) + ", " for item in value.value)
            if isinstance(value.value, torch.Size):
                return f"{self.ref(torch.Size)}(({items}))"
            return f"[{items}]" if isinstance(value.value, list) else f"({items})"
        self.rebuilt_tensor = True
        self.outputs.append(value)
        if isinstance(value.value, torch.SymFloat):  # returned as a 0-d tensor (`GraphBuilder.float_output`)
            return f"___out[{len(self.outputs) - 1}].item()"
        return f"___out[{len(self.outputs) - 1}]"

    def _build_function(self, value: FunctionValue) -> str:
        if value.fn is None:
            defaults = "(" + "".join(self.rebuild(d) + ", " for d in value.defaults) + ")"
            kwdefaults = self.rebuild(DictValue(value.kwdefaults)) if value.kwdefaults else "None"
            closure = "(" + "".join(self.rebuild_cell(cell) + ", " for cell in value.closure) + ")"
            stored = {**value.attributes, **value.special}
            attributes = "{" + ", ".join(f"{name!r}: {self.rebuild(item)}" for name, item in stored.items()) + "}"
            plain = (f"___make_function({self.ref(value.code)}, {self.ref(value.globals)}, "
                     f"{defaults}, {kwdefaults}, {closure}, {attributes})")
        else:
            plain = self.expr(value.source) if value.source is not None else self.ref(value.fn)
        if value.bound_self is None:
            return plain
        return f"{self.ref(types.MethodType)}({plain}, {self.rebuild(value.bound_self)})"

    def rebuild_cell(self, cell: CellValue) -> str:
        """The cell object itself: the pre-existing one, or one made once per entry call."""
        if cell.real is not None and cell.source is not None:
            return self.expr(cell.source)
        if cell.real is not None:
            return self.ref(cell.real)
        return self.rebuild(cell)

    def _build_cell(self, cell: CellValue) -> str:
        """A cell made in the region: made empty first, so that what it holds may hold it (a
        class statement's `__class__` cell, held by the class's own methods)."""
        built = self._register(cell)
        self.rebuilt.append(f"{built} = {self.ref(types.CellType)}()")
        if cell.contents is not None:
            self._when_built(self.rebuild(cell.contents), f"{built}.cell_contents = ___VALUE")
        return built

    def _register(self, value: Value) -> str:
        built = f"___r{len(self._built)}"
        self._built[id(value)] = (value, built)
        return built

    def _when_built(self, made: str, line: str) -> None:
        """`line` with `___VALUE` standing for `made`, once the variable `made` is assigned (a
        class being made is named before it is)."""
        line = line.replace("___VALUE", made)
        if made in self._unassigned:
            self._unassigned[made].append(line)
        else:
            self.rebuilt.append(line)

    def class_ref(self, cls: type) -> str:
        """A class as residual code refers to it: one the region made is made anew."""
        made = made_class(cls)
        return self.ref(cls) if made is None else self._build_made_class(made)

    def _build_made_class(self, made: MadeClass) -> str:
        """A class the region made, made anew (`make_class`: no hook runs again) from the
        namespace `type.__new__` was given, then given what the region stored on it and the
        library setups it ran, in order."""
        known = self._built.get(id(made.value))
        if known is not None:
            return known[1]
        built = self._register(made.value)
        if made.factory is not None:
            function, args, kwargs = made.factory
            arguments = [self.rebuild(arg) for arg in args]
            arguments += [f"{key}={self.rebuild(arg)}" for key, arg in kwargs.items()]
            self.rebuilt.append(f"{built} = {self.ref(function)}({', '.join(arguments)})")
            self._replay_class_events(made, built)
            return built
        self._unassigned[built] = []
        fixed = {"__module__", "__qualname__", "__slots__"}  # what type.__new__ reads
        namespace = ", ".join(f"{name!r}: {self.rebuild(value) if name in fixed else 'None'}"
                              for name, value in made.namespace.items() if name != "__classcell__")
        bases = "(" + "".join(self.class_ref(base) + ", " for base in made.bases) + ")"
        self.rebuilt.append(f"{built} = ___make_class({self.class_ref(made.meta)}, {made.name!r}, {bases}, "
                            f"{{{namespace}}})")
        self.rebuilt.extend(self._unassigned.pop(built))
        for name, value in made.namespace.items():
            if name not in fixed and name != "__classcell__":
                self.rebuilt.append(f"___type_setattr({built}, {name!r}, {self.rebuild(value)})")
        self._replay_class_events(made, built)
        return built

    def _replay_class_events(self, made: MadeClass, built: str) -> None:
        for event in made.events:
            if event[0] == "store" and event[2] is None:
                self.rebuilt.append(f"___type_delattr({built}, {event[1]!r})")
            elif event[0] == "store":
                self.rebuilt.append(f"___type_setattr({built}, {event[1]!r}, {self.rebuild(event[2])})")
            else:
                function, args, kwargs = event[1:]
                arguments = [built, *(self.rebuild(arg) for arg in args[1:])]
                arguments += [f"{key}={self.rebuild(arg)}" for key, arg in kwargs.items()]
                self.rebuilt.append(f"{self.ref(function)}({', '.join(arguments)})")

    def key(self, key: Any) -> str:
        """A key of a modelled dict: a key standing for a value of the trace is that value,
        rebuilt (tuples and frozensets of them, item by item); any other a literal."""
        if isinstance(key, ValueKey):
            return self.rebuild(key.value)
        if type(key) in (tuple, frozenset) and holds_value_keys(key):
            items = "(" + "".join(self.key(item) + ", " for item in key) + ")"
            return items if type(key) is tuple else f"{self.ref(frozenset)}({items})"
        return self.literal(key)

    def literal(self, python_value: Any) -> str:
        if type(python_value) in _LITERAL_TYPES:
            return repr(python_value)
        if isinstance(python_value, type):
            return self.class_ref(python_value)
        if type(python_value) in (tuple, frozenset) and _holds_made_class(python_value):
            items = "(" + "".join(self.literal(item) + ", " for item in python_value) + ")"
            return items if type(python_value) is tuple else f"{self.ref(frozenset)}({items})"
        if type(python_value) is float and python_value == python_value and abs(python_value) != float("inf"):
            return repr(python_value)
        return self.ref(python_value)

    def replay_lines(self, effects: SideEffects) -> list[str]:
        lines = []
        for container in effects.mutated.values():
            target = self.expr(container.source)
            new = self.rebuild(_detached(container))
            if container.cls is not None and is_user_class(container.cls):  # through its builtin base
                lines.append(f"___refill({target}, {new}, {self.ref(builtin_base(container.cls))})")
            elif isinstance(container, SequenceValue) and not isinstance(container, DequeValue):
                lines.append(f"{target}[:] = {new}")
            else:
                lines.append(f"___replace_contents({target}, {new})")
        for key, (owner, name, value) in effects.attribute_stores.items():
            target = self.expr(owner.source)
            # the class's own __setattr__ already ran in the trace, or the store was to the __dict__
            raw = is_instance_value(owner) or key in effects.through_dict
            through_dict = raw and _shadowed(owner, name)  # a descriptor would take object.__setattr__'s
            if raw and (value is None or key in effects.readded):
                # deleted (and maybe stored again): an attribute the region added, then deleted,
                # is not there to delete
                lines.append(f"___instance_dict({target}).pop({name!r}, None)" if through_dict
                             else f"___remove_own_attribute({target}, {name!r})")
            if value is None:
                if not raw:
                    lines.append(f"___delattr({target}, {name!r})")
            elif through_dict:
                lines.append(f"___instance_dict({target})[{name!r}] = {self.rebuild(value)}")
            elif raw:
                lines.append(f"___store_own({target}, {name!r}, {self.rebuild(value)})")
            else:
                lines.append(f"{target}.{name} = {self.rebuild(value)}")
        for f_globals, name, value in effects.global_stores.values():
            lines.append(f"{self.ref(f_globals)}[{name!r}] = {self.rebuild(value)}")
        for cell in effects.cell_stores.values():
            if cell.source is None:
                raise self._on_break(gb.UNRECONSTRUCTIBLE_VALUE, "cell store", type="closure cell")
            lines.append(f"{self.expr(cell.source)}.cell_contents = {self.rebuild(cell.contents)}")
        for iterator in effects.stepped_iterators():
            lines.append(f"___advance({self.expr(iterator.source)}, {iterator.position})")
        for function, args, kwargs in effects.replayed_calls:
            arguments = [self.rebuild(arg) for arg in args]
            arguments += [f"{key}={self.rebuild(arg)}" for key, arg in kwargs.items()]
            lines.append(f"{self.ref(function)}({', '.join(arguments)})")
        return lines


def _holds_made_class(real: Any) -> bool:
    if made_class(real) is not None:
        return True
    return type(real) in (tuple, frozenset) and any(_holds_made_class(item) for item in real)


def _detached(container: Value) -> Value:
    """The container's new contents as a fresh value, so it is rebuilt item by item."""
    if isinstance(container, SequenceValue):
        return SequenceValue(container.items, list)
    if container.kind is dict:
        return DictValue(container.items)
    return new_set(set, container.items, container.table)


def as_class(tensor: torch.Tensor, cls: type) -> torch.Tensor:
    """`tensor` as an instance of `cls` (itself when it is one: the `eager` backend ran the graph
    on the subclass)."""
    return tensor if type(tensor) is cls else tensor.as_subclass(cls)
