"""The opcode table of CPython 3.11: one handler per opcode, named `op_<OPNAME>`.

Each handler's body shows its stack effect: what it pops, what it pushes. Meaning is delegated to `operations`, `attributes`, `calls`
and `contexts`, so that another Python version is another table over the same
operations. `BINARY_OPS` and `COMPARE_OPS` decode the 3.11 opargs.
"""
from __future__ import annotations

import builtins
import collections.abc
import dis
import itertools
import operator

from ..guards.sources import ConstantSource
from ..objects import attributes, class_statements, classes, exceptions, operations, sets, slices, text
from ..objects.values import (
    NONE,
    NULL,
    CellValue,
    ConstantValue,
    DictValue,
    FunctionValue,
    IteratorValue,
    LazyIteratorValue,
    SequenceValue,
    TensorValue,
)
from . import calls, contexts
from . import graph_breaks as gb

_NB_FUNCTIONS = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
    "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_,
    "**": operator.pow, ">>": operator.rshift, "-": operator.sub, "/": operator.truediv,
    "^": operator.xor, "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv,
    "<<=": operator.ilshift, "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod,
    "|=": operator.ior, "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub,
    "/=": operator.itruediv, "^=": operator.ixor,
}
BINARY_OPS = [_NB_FUNCTIONS[symbol] for _, symbol in dis._nb_ops]
COMPARE_OPS = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]


def _generators():
    """`generators`, whose frames are frames: imported when first needed."""
    from . import generators

    return generators


class Instructions311:
    # -- stack manipulation ------------------------------------------------------------
    def op_NOP(self, inst):
        pass

    op_RESUME = op_PRECALL = op_EXTENDED_ARG = op_CACHE = op_NOP

    def op_POP_TOP(self, inst):
        dropped = self.pop()
        if not isinstance(dropped, (ConstantValue, TensorValue)):
            _generators().dropped(self.tracer, [dropped])

    def op_PUSH_NULL(self, inst):
        self.push(NULL)

    def op_COPY(self, inst):
        self.push(self.stack[-inst.arg])

    def op_SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # -- names ---------------------------------------------------------------------------
    def op_LOAD_CONST(self, inst):
        self.push(operations.constant(inst.argval))

    def op_LOAD_FAST(self, inst):
        value = self.local(inst.argval)
        if value is None:
            raise self.tracer.user_error(UnboundLocalError(
                f"cannot access local variable '{inst.argval}' where it is not associated with a value"))
        self.push(value)

    def op_STORE_FAST(self, inst):
        replaced = self.locals.get(inst.argval)
        self.locals[inst.argval] = self.pop()
        if replaced is not None and not isinstance(replaced, (ConstantValue, TensorValue)):
            _generators().dropped(self.tracer, [replaced])

    def op_DELETE_FAST(self, inst):
        _generators().dropped(self.tracer, [self.locals.pop(inst.argval)])

    def op_LOAD_GLOBAL(self, inst):
        if inst.arg & 1:
            self.push(NULL)
        self.push(self.tracer.load_global(self.globals, inst.argval, self.builtins()))

    def op_STORE_GLOBAL(self, inst):
        self.tracer.side_effects.store_global(self.globals, inst.argval, self.pop())

    # a class body's names live in its namespace (`class_statements`)
    def op_LOAD_NAME(self, inst):
        self._check_namespace(inst)
        self.push(class_statements.load_name(self.tracer, self, inst.argval))

    def op_STORE_NAME(self, inst):
        self._check_namespace(inst)
        operations.setitem(self.tracer, self.namespace, ConstantValue(inst.argval), self.pop())

    def op_DELETE_NAME(self, inst):
        self._check_namespace(inst)
        class_statements.delete_name(self.tracer, self, inst.argval)

    def op_LOAD_CLASSDEREF(self, inst):
        self._check_namespace(inst)
        found = class_statements.namespace_item(self.tracer, self.namespace, inst.argval)
        self.push(found if found is not None else self.tracer.cell_contents(self.cells[inst.argval]))

    def op_SETUP_ANNOTATIONS(self, inst):
        self._check_namespace(inst)
        if class_statements.namespace_item(self.tracer, self.namespace, "__annotations__") is None:
            operations.setitem(self.tracer, self.namespace, ConstantValue("__annotations__"), DictValue({}))

    def _check_namespace(self, inst):
        if self.namespace is None:  # module-level code, which no compiled function holds
            raise self.tracer.graph_break(gb.UNSUPPORTED_OPCODE, f"{inst.opname} {inst.argrepr}",
                                          opname=inst.opname)

    def op_MAKE_CELL(self, inst):
        contents = self.local(inst.argval)
        self.locals.pop(inst.argval, None)
        self.cells[inst.argval] = CellValue(contents)

    def op_COPY_FREE_VARS(self, inst):
        for name, cell in zip(self.code.co_freevars, self.closure):
            self.cells[name] = self.tracer.canonical_cell(cell)

    def op_LOAD_CLOSURE(self, inst):
        self.push(self.cells[inst.argval])

    def op_LOAD_DEREF(self, inst):
        self.push(self.tracer.cell_contents(self.cells[inst.argval]))

    def op_STORE_DEREF(self, inst):
        self.tracer.side_effects.store_cell(self.cells[inst.argval], self.pop())

    def op_IMPORT_NAME(self, inst):
        fromlist, level = self.pop(), self.pop()
        try:  # run for real, as the first call would: a module is imported once
            module = __import__(inst.argval, self.globals, None,
                                operations.python_value(self.tracer, fromlist),
                                operations.python_value(self.tracer, level))
        except Exception as error:  # ImportError, or whatever the module's own code raised
            raise self.tracer.user_error(error, f"import {inst.argval}") from None
        # the module itself is the source: its attributes are re-read (and guarded) at each call
        self.push(ConstantValue(module, ConstantSource(id(module), module)))

    def op_IMPORT_FROM(self, inst):
        found = attributes.lookup(self.tracer, self.stack[-1], inst.argval)
        if found is None:
            module = getattr(self.stack[-1], "value", None)
            name = getattr(module, "__name__", "<unknown module name>")
            where = getattr(module, "__file__", None) or "unknown location"
            raise self.tracer.user_error(ImportError(f"cannot import name '{inst.argval}' from '{name}' ({where})",
                                                     name=name))
        self.push(found)

    # -- attributes and items ------------------------------------------------------------
    def op_LOAD_ATTR(self, inst):
        self.push(attributes.load_attr(self.tracer, self.pop(), inst.argval))

    def op_LOAD_METHOD(self, inst):
        receiver = self.pop()
        self.push(NULL)
        self.push(attributes.load_attr(self.tracer, receiver, inst.argval))

    def op_STORE_ATTR(self, inst):
        receiver, value = self.pop(), self.pop()
        attributes.store_attr(self.tracer, receiver, inst.argval, value)

    def op_DELETE_ATTR(self, inst):
        attributes.delete_attr(self.tracer, self.pop(), inst.argval)

    def op_BINARY_SUBSCR(self, inst):
        key, container = self.pop(), self.pop()
        self.push(operations.getitem(self.tracer, container, key))

    def op_STORE_SUBSCR(self, inst):
        key, container, value = self.pop(), self.pop(), self.pop()
        operations.setitem(self.tracer, container, key, value)

    def op_DELETE_SUBSCR(self, inst):
        key, container = self.pop(), self.pop()
        operations.delitem(self.tracer, container, key)

    def op_BUILD_SLICE(self, inst):
        parts = self.popn(inst.arg)  # symbolic bounds stay symbolic: the graph computes them
        self.push(slices.make(self.tracer, parts))

    # -- operators -----------------------------------------------------------------------
    def op_BINARY_OP(self, inst):
        rhs, lhs = self.pop(), self.pop()
        self.push(operations.binary(self.tracer, BINARY_OPS[inst.arg], lhs, rhs))

    def op_COMPARE_OP(self, inst):
        rhs, lhs = self.pop(), self.pop()
        self.push(operations.binary(self.tracer, COMPARE_OPS[inst.arg], lhs, rhs))

    def op_IS_OP(self, inst):
        rhs, lhs = self.pop(), self.pop()
        self.push(ConstantValue(operations.is_same(self.tracer, lhs, rhs) != bool(inst.arg)))

    def op_CONTAINS_OP(self, inst):
        container, item = self.pop(), self.pop()
        self.push(ConstantValue(operations.contains(self.tracer, container, item) != bool(inst.arg)))

    def op_UNARY_NEGATIVE(self, inst):
        self.push(operations.unary(self.tracer, operator.neg, self.pop()))

    def op_UNARY_POSITIVE(self, inst):
        self.push(operations.unary(self.tracer, operator.pos, self.pop()))

    def op_UNARY_INVERT(self, inst):
        self.push(operations.unary(self.tracer, operator.invert, self.pop()))

    def op_UNARY_NOT(self, inst):
        self.push(ConstantValue(not operations.truth(self.tracer, self.pop())))

    # -- building containers -------------------------------------------------------------
    def op_BUILD_TUPLE(self, inst):
        self.push(SequenceValue(self.popn(inst.arg), tuple))

    def op_BUILD_LIST(self, inst):
        self.push(SequenceValue(self.popn(inst.arg), list))

    def op_BUILD_SET(self, inst):
        self.push(sets.new_set(set, sets.members(self.tracer, self.popn(inst.arg))))

    def op_BUILD_MAP(self, inst):
        flat = self.popn(2 * inst.arg)
        self.push(DictValue({operations.hashable_key(self.tracer, flat[i]): flat[i + 1]
                             for i in range(0, len(flat), 2)}))

    def op_BUILD_CONST_KEY_MAP(self, inst):
        keys = operations.python_value(self.tracer, self.pop())
        self.push(DictValue(dict(zip(keys, self.popn(inst.arg)))))

    def op_BUILD_STRING(self, inst):
        self.push(text.joined(self.tracer, self.popn(inst.arg)))

    def op_FORMAT_VALUE(self, inst):
        spec = self.pop() if inst.arg & 0x04 else ConstantValue("")
        value = self.pop()
        conversion = {0x01: str, 0x02: repr, 0x03: ascii}.get(inst.arg & 0x03)
        later = text.format_later(value, conversion, operations.python_value(self.tracer, spec))
        if later is not None:  # a symbolic number: formatted when the text is needed
            self.push(later)
            return
        shown = text.user_text(self.tracer, value, conversion) if conversion in (str, repr) else None
        if shown is not None:  # a user class's __str__ / __repr__, a container's
            value, conversion = shown, None
        shown = text.user_text(self.tracer, value, format, spec) if conversion is None else None
        if shown is not None:  # a user class's __format__ (or object's, through __str__)
            self.push(shown)
            return
        value = operations.python_value(self.tracer, value, purpose="an f-string")
        if conversion is not None:
            value = conversion(value)
        self.push(ConstantValue(format(value, operations.python_value(self.tracer, spec))))

    def _built(self, depth: int):
        """The container an instruction adds to: made by an earlier instruction, or (in a resume
        function) passed in, when the change is replayed on the real one."""
        target = self.stack[-depth]
        self.tracer.side_effects.mutate(target)
        return target

    def op_LIST_APPEND(self, inst):
        item = self.pop()
        self._built(inst.arg).items.append(item)

    def op_SET_ADD(self, inst):
        item = self.pop()
        sets.add(self._built(inst.arg), operations.hashable_key(self.tracer, item, sets.MEMBER), item)

    def op_MAP_ADD(self, inst):
        value, key = self.pop(), self.pop()
        self._built(inst.arg).items[operations.hashable_key(self.tracer, key)] = value

    def op_LIST_EXTEND(self, inst):
        items = operations.iterate(self.tracer, self.pop())
        self._built(inst.arg).items.extend(items)

    def op_SET_UPDATE(self, inst):
        added = self.pop()
        sets.update(self.tracer, self.stack[-inst.arg], "update", [added])

    def op_DICT_UPDATE(self, inst):
        items = operations.dict_items(self.tracer, self.pop())
        self._built(inst.arg).items.update(items)

    def op_DICT_MERGE(self, inst):
        function = self.stack[-inst.arg - 3]  # below the positional arguments and the dict
        items = operations.dict_items(self.tracer, self.pop(), function)
        target = self._built(inst.arg)
        for key in items:
            if target.lookup(key) is not None:  # `f(**a, **b)` with a key in both
                raise self.tracer.user_error(TypeError(
                    f"{classes.callable_text(function)} got multiple values for keyword argument '{key}'"))
        target.items.update(items)

    def op_LIST_TO_TUPLE(self, inst):
        self.push(SequenceValue(self.pop().items, tuple))

    def op_UNPACK_SEQUENCE(self, inst):
        value = self.pop()
        if isinstance(value, SequenceValue):
            items = operations.iterate(self.tracer, value)
        else:  # CPython takes one item more than it needs, to tell that there are too many
            items = list(itertools.islice(operations.each(self.tracer, value), inst.arg + 1))
        if len(items) > inst.arg:
            raise self.tracer.user_error(ValueError(f"too many values to unpack (expected {inst.arg})"))
        if len(items) < inst.arg:
            raise self.tracer.user_error(ValueError(
                f"not enough values to unpack (expected {inst.arg}, got {len(items)})"))
        self.stack.extend(reversed(items))

    def op_UNPACK_EX(self, inst):
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = operations.iterate(self.tracer, self.pop())
        if len(items) < before + after:
            raise self.tracer.user_error(ValueError(
                f"not enough values to unpack (expected at least {before + after}, got {len(items)})"))
        middle = SequenceValue(items[before:len(items) - after], list)
        unpacked = items[:before] + [middle] + items[len(items) - after:]
        self.stack.extend(reversed(unpacked))

    # -- control flow --------------------------------------------------------------------
    def op_JUMP_FORWARD(self, inst):
        self.jump_to(inst.argval)

    op_JUMP_BACKWARD = op_JUMP_BACKWARD_NO_INTERRUPT = op_JUMP_FORWARD

    def _jump_if(self, inst, predicate) -> None:
        if predicate(self.pop()):
            self.jump_to(inst.argval)

    def op_POP_JUMP_FORWARD_IF_TRUE(self, inst):
        self._jump_if(inst, lambda value: operations.truth(self.tracer, value))

    def op_POP_JUMP_FORWARD_IF_FALSE(self, inst):
        self._jump_if(inst, lambda value: not operations.truth(self.tracer, value))

    def op_POP_JUMP_FORWARD_IF_NONE(self, inst):
        self._jump_if(inst, operations.is_none)

    def op_POP_JUMP_FORWARD_IF_NOT_NONE(self, inst):
        self._jump_if(inst, lambda value: not operations.is_none(value))

    op_POP_JUMP_BACKWARD_IF_TRUE = op_POP_JUMP_FORWARD_IF_TRUE
    op_POP_JUMP_BACKWARD_IF_FALSE = op_POP_JUMP_FORWARD_IF_FALSE
    op_POP_JUMP_BACKWARD_IF_NONE = op_POP_JUMP_FORWARD_IF_NONE
    op_POP_JUMP_BACKWARD_IF_NOT_NONE = op_POP_JUMP_FORWARD_IF_NOT_NONE

    def op_JUMP_IF_TRUE_OR_POP(self, inst):
        if operations.truth(self.tracer, self.stack[-1]):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def op_JUMP_IF_FALSE_OR_POP(self, inst):
        if not operations.truth(self.tracer, self.stack[-1]):
            self.jump_to(inst.argval)
        else:
            self.pop()

    def op_GET_ITER(self, inst):
        iterable = self.pop()
        if not isinstance(iterable, (IteratorValue, LazyIteratorValue)):
            iterable = operations.iterator_of(self.tracer, iterable)
        self.push(iterable)

    def op_FOR_ITER(self, inst):
        iterator = self.stack[-1]
        # hot: a modelled iterator is stepped directly; a user iterator's `__next__` is called
        item = iterator.next_item() if isinstance(iterator, (IteratorValue, LazyIteratorValue)) \
            else operations.next_item(self.tracer, iterator)
        if item is None:
            self.pop()
            if not isinstance(iterator, IteratorValue):  # a generator `zip` did not finish goes with it
                _generators().dropped(self.tracer, [iterator])
            self.jump_to(inst.argval)
        else:
            self.push(item)

    def op_RETURN_VALUE(self, inst):
        result = self.pop()
        if self.is_root:
            _generators().finish(self.tracer, self, result)
        else:  # the frame's locals go: generators only they held are collected
            _generators().dropped(self.tracer, [*self.locals.values(), *self.cells.values(), *self.stack],
                               [result], self)
        self.result = result

    def op_LOAD_BUILD_CLASS(self, inst):
        self.push(ConstantValue(builtins.__build_class__))  # a class statement: `class_statements`

    def op_LOAD_ASSERTION_ERROR(self, inst):
        self.push(ConstantValue(AssertionError))

    def op_RAISE_VARARGS(self, inst):
        if inst.arg == 0:
            handled = self.tracer.handled.current()
            if operations.is_none(handled):
                raise self.tracer.user_error(RuntimeError("No active exception to reraise"))
            raise exceptions.reraise(self.tracer, handled, "raise")
        cause = self.pop() if inst.arg == 2 else None
        exception = exceptions.to_raise(self.tracer, self.pop())
        if cause is not None:
            exceptions.set_cause(self.tracer, exception, cause)
        raise exceptions.raised(self.tracer, exception, f"raise {exception.cls.__name__}")

    # -- exception handlers (reached through the exception table) -------------------------
    def op_PUSH_EXC_INFO(self, inst):
        exception = self.pop()
        self.push(self.tracer.handled.enter(exception))
        self.push(exception)

    def op_POP_EXCEPT(self, inst):
        self.tracer.handled.leave(self.pop())

    def op_CHECK_EXC_MATCH(self, inst):
        handler = self.pop()
        self.push(ConstantValue(exceptions.matches(self.tracer, self.stack[-1], handler)))

    def op_RERAISE(self, inst):
        exception = self.pop()
        raise exceptions.reraise(self.tracer, exception, "re-raise")

    def op_WITH_EXCEPT_START(self, inst):
        exception, exit_function = self.stack[-1], self.stack[-4]
        arguments = [ConstantValue(exception.python_type()), exception, exception.traceback]
        self.push(calls.call_value(self.tracer, exit_function, arguments, {}))

    def op_RETURN_GENERATOR(self, inst):
        self.push(NONE)

    def op_YIELD_VALUE(self, inst):
        # the compiled function itself is a generator (those called inside it run in a GeneratorFrame)
        raise self.tracer.graph_break(gb.GENERATOR, self.code.co_name, name=self.code.co_name)

    def op_GET_YIELD_FROM_ITER(self, inst):
        if not isinstance(self.stack[-1], (IteratorValue, LazyIteratorValue)):
            self.stack[-1] = operations.iterator_of(self.tracer, self.stack[-1])

    def op_SEND(self, inst):
        sent = self.pop()
        item, returned = _generators().delegate(self.tracer, self.stack[-1], sent)
        if item is None:
            self.stack[-1] = returned
            self.jump_to(inst.argval)
        else:
            self.push(item)

    # -- calls ---------------------------------------------------------------------------
    def op_KW_NAMES(self, inst):
        self.kw_names = self.code.co_consts[inst.arg]

    def op_CALL(self, inst):
        args = self.popn(inst.arg)
        callable_or_self, head = self.pop(), self.pop()
        if head is NULL:
            function = callable_or_self
        else:
            function, args = head, [callable_or_self, *args]
        names, self.kw_names = self.kw_names, ()
        split = len(args) - len(names)
        kwargs = dict(zip(names, args[split:]))
        result = calls.call_value(self.tracer, function, args[:split], kwargs)
        if self.tracer.generators and any(isinstance(arg, LazyIteratorValue) for arg in args):
            # an iterator made for the call (`any(g(x) for ...)`, `list(zip(a, b))`) goes when it
            # returns: a generator it left suspended is collected there
            _generators().dropped(self.tracer, args, [result])
        self.push(result)

    def op_CALL_FUNCTION_EX(self, inst):
        kwargs = operations.dict_items(self.tracer, self.pop(), self.stack[-2]) if inst.arg & 1 else {}
        args = operations.iterate(self.tracer, self.pop())
        function = self.pop()
        self.pop()  # the NULL 3.11 keeps below the callable
        self.push(calls.call_value(self.tracer, function, args, kwargs))

    def op_MAKE_FUNCTION(self, inst):
        code = self.pop().value
        closure = tuple(self.pop().items) if inst.arg & 0x08 else ()
        special = {}
        if inst.arg & 0x04:  # (name, annotation, name, annotation...)
            pairs = self.pop().items
            annotations = {operations.hashable_key(self.tracer, pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)}
            special["__annotations__"] = DictValue(annotations)
        kwdefaults = operations.dict_items(self.tracer, self.pop()) if inst.arg & 0x02 else {}
        defaults = tuple(self.pop().items) if inst.arg & 0x01 else ()
        self.push(FunctionValue(code, self.globals, code.co_name, defaults, kwdefaults, closure, special=special))

    # -- structural pattern matching -----------------------------------------------------
    def op_GET_LEN(self, inst):
        self.push(calls.call_value(self.tracer, ConstantValue(len), [self.stack[-1]], {}))

    def op_MATCH_MAPPING(self, inst):
        self.push(ConstantValue(issubclass(self.stack[-1].python_type(), collections.abc.Mapping)))

    def op_MATCH_SEQUENCE(self, inst):
        cls = self.stack[-1].python_type()
        self.push(ConstantValue(issubclass(cls, collections.abc.Sequence)
                                and not issubclass(cls, (str, bytes, bytearray))))

    def op_MATCH_KEYS(self, inst):
        keys, subject = self.stack[-1], self.stack[-2]
        items = operations.dict_items(self.tracer, subject)
        wanted = operations.python_value(self.tracer, keys)
        if all(key in items for key in wanted):
            self.push(SequenceValue([items[key] for key in wanted], tuple))
        else:
            self.push(NONE)

    def op_MATCH_CLASS(self, inst):
        names, cls, subject = self.pop(), self.pop(), self.pop()
        cls = operations.python_value(self.tracer, cls)
        if not issubclass(subject.python_type(), cls):
            self.push(NONE)
            return
        positional = list(getattr(cls, "__match_args__", ()))[:inst.arg]
        if inst.arg and not positional:  # int(x), str(x)...: the subject itself
            values = [subject]
        else:
            values = [attributes.load_attr(self.tracer, subject, name) for name in positional]
        values += [attributes.load_attr(self.tracer, subject, name)
                   for name in operations.python_value(self.tracer, names)]
        self.push(SequenceValue(values, tuple))

    # -- context managers ----------------------------------------------------------------
    def op_BEFORE_WITH(self, inst):
        manager = self.pop()
        bound = self.instructions[self.index].opname != "POP_TOP"
        self.push(contexts.enter(self.tracer, manager, bound, self.push))

