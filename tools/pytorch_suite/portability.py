"""Which of PyTorch's TorchDynamo tests can judge graphwright: rules over a test's source.

A test is portable when what it checks is observable through the public API:
values, gradients, side effects, exceptions, and graph counts (a counting
backend such as `CompileCounter` sees one call per graph under either
compiler). It is not portable when it checks TorchDynamo itself. The source
checked is the test method with its decorators, plus the methods of its class
it calls through `self.` (transitively). Each rule names its reason:
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .plugin import MIRRORED_CONFIG

COMPILER_CONFIG_READ: frozenset[str] = frozenset()
"""Keys of `torch.compiler.config` (public, not TorchDynamo's) that graphwright reads itself."""

RULES: list[tuple[str, re.Pattern]] = [(reason, re.compile(pattern)) for reason, pattern in [
    ("TorchDynamo's counters and profiles",
     r"\bcounters\b|CompileProfiler|compile_times|CompileCounterInt|frame_count\s*\(|_dynamo\.utils\."),
    ("graph, code or error text",
     r"assertExpectedInline|assertExpectedRaisesInline|assertExpected\(|normalize_gm|print_readable|"
     r"FileCheck|run_and_get_code|\.code\b|dis\.(?:dis|get_instructions|Bytecode)|get_code\("),
    ("logs", r"assertLogs|torch\._logging|logs_to_string|make_logging_test|LoggingTestCase|trace_log|"
             r"set_logs|caplog|log_compilation_metrics|assertWarns"),
    ("guards and cache entries",
     r"guard_manager|GuardManager|CheckFunctionManager|_dynamo\.guards|guard_fail_fn|guard_export_fn|"
     r"guard_filter_fn|guard_failures|install_guard_manager_testing_hook|_debug_get_cache_entry_list|"
     r"cache_entry|\bcheck_fn\b|get_guard|GuardSource|_dynamo\.cache_size"),
    ("TorchDynamo internals",
     r"_dynamo\.(?:eval_frame|convert_frame|symbolic_convert|variables|bytecode_transformation|"
     r"bytecode_analysis|output_graph|source|side_effects|trace_rules|resume_execution|codegen|"
     r"polyfills|decorators\.|external_utils|pgo|package|precompile_context|aot_compile|callback|"
     r"hooks|code_context|mutation_guard|replay_record|debug_utils|comptime|funcname_cache|"
     r"graph_deduplication|graph_region_tracker|create_parameter_op|metrics_context|"
     r"compiled_autograd|device_interface|backends\.)|"
     r"_C\._dynamo|set_eval_frame|InstructionTranslator|\bcomptime\b|\bbuilder\.|ConstantSource|"
     r"GetItemSource|LocalSource|substitute_in_graph|torch\._guards|TracingContext|dont_skip_tracing|"
     r"skipfiles|is_dynamo_supported|_dynamo\.lookup_backend|register_backend|_dynamo\.list_backends|"
     r"compiled_autograd|_dynamo\.run\b|\bsame_two_models\b|set_stance|"
     r"_dynamo\.disallow_in_graph|forbid_in_graph|_dynamo\.mark_static_address|"
     r"mark_unbacked|_dynamo\.maybe_mark_dynamic|mark_static_address|nested_graph_breaks"),
    ("export", r"_dynamo\.export|torch\.export|\bexport\(|\bexport=True"),
    ("explain output", r"_dynamo\.explain|\bexplain\("),
    ("TorchDynamo's exception types and texts",
     r"_dynamo\.exc\.(?!Unsupported\b)\w+|\b(?:UserError|InternalTorchDynamoError|TorchRuntimeError|"
     r"BackendCompilerFailed|UncapturedHigherOrderOpError|ObservedException|SkipFrame|RestartAnalysis|"
     r"TorchDynamoException|unimplemented|ResumePrologueTracingError)\b|"
     r"assertRaisesRegex\s*\(\s*(?:torch\._dynamo\.exc\.)?Unsupported"),
    ("AOT autograd or functorch config", r"_functorch\.config|functorch_config"),
]]

_DYNAMO_CONFIG_PATCH = re.compile(
    r"(?:_dynamo\.config|\bdynamo_config|(?<![\w.])config)\.patch\(\s*(?P<args>[^)]*)")
_DYNAMO_CONFIG_WRITE = re.compile(r"(?:_dynamo\.config|\bdynamo_config)\.(?P<key>\w+)\s*=[^=]")
_COMPILER_CONFIG = re.compile(r"torch\.compiler\.config\.(?:patch\(\s*(?P<args>[^)]*)|(?P<key>\w+)\s*=[^=])")
_PATCH_OBJECT = re.compile(r"patch\.object\(\s*(?:torch\._dynamo\.config|dynamo_config|config)\s*,\s*['\"](\w+)")
_KEY = re.compile(r"['\"](\w+)['\"]\s*[:,]|(\w+)\s*=")


@dataclass
class Verdict:
    portable: bool
    reasons: list[str]


def config_keys(source: str) -> set[str]:
    """The TorchDynamo config keys `source` sets (patch, patch.object, assignment); Inductor's
    config is left out: graphwright's `inductor` backend reads it as PyTorch does."""
    keys: set[str] = set()
    for match in _DYNAMO_CONFIG_PATCH.finditer(source):
        start = match.start()
        if "_inductor" in source[max(0, start - 12):start] or "inductor_config" in source[max(0, start - 20):start]:
            continue
        keys.update(quoted or named for quoted, named in _KEY.findall(match.group("args")))
    keys.update(match.group("key") for match in _DYNAMO_CONFIG_WRITE.finditer(source))
    keys.update(_PATCH_OBJECT.findall(source))
    for match in _COMPILER_CONFIG.finditer(source):
        found = {quoted or named for quoted, named in _KEY.findall(match.group("args") or "")}
        keys.update(f"torch.compiler.config.{key}" for key in found | {match.group("key")} - {None}
                    if key not in COMPILER_CONFIG_READ)
    return keys


def judge(source: str) -> Verdict:
    reasons = [reason for reason, pattern in RULES if pattern.search(source)]
    unread = sorted(config_keys(source) - set(MIRRORED_CONFIG))
    if unread:
        reasons.append("config graphwright does not read: " + ", ".join(unread))
    return Verdict(not reasons, reasons)


class TestSources:
    """The source of every test method in one file, found by class and name (the base classes
    of a class too, also those of the sibling modules it imports, as CPython's tests inherit
    from `seq_tests.CommonTest`), with the methods it calls through `self.`."""

    def __init__(self, text: str, siblings: dict[str, str] | None = None) -> None:
        self.classes: dict[tuple[str, str], tuple[list[tuple[str, str]], dict[str, str]]] = {}
        for module, module_text in [("", text), *(siblings or {}).items()]:
            self._read(module, module_text, set(siblings or ()))

    def _read(self, module: str, text: str, siblings: set[str]) -> None:
        lines = text.splitlines()
        try:
            body = ast.parse(text).body
        except SyntaxError:  # newer syntax (3.12's `class A[T]`): the file collects no tests on 3.11
            return
        for node in body:
            if isinstance(node, ast.ClassDef):
                methods = {item.name: self._segment(lines, item) for item in node.body
                           if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
                bases = []
                for base in node.bases:
                    qualifier, _, name = ast.unparse(base).rpartition(".")
                    bases.append((qualifier if qualifier in siblings else module, name))
                self.classes[module, node.name] = (bases, methods)

    @staticmethod
    def _segment(lines: list[str], node: ast.AST) -> str:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return "\n".join(lines[first - 1:node.end_lineno])

    def method(self, cls: str, name: str) -> str | None:
        seen = set()
        queue = [("", cls)]
        while queue:
            current = queue.pop(0)
            if current in seen or current not in self.classes:
                continue
            seen.add(current)
            bases, methods = self.classes[current]
            if name in methods:
                return methods[name]
            queue.extend(bases)
        return None

    def test_source(self, cls: str, name: str) -> str | None:
        """The test's own source and its `self.` callees', or None when it is not in this file
        (a generated name, e.g. a parametrized variant, is matched by its longest prefix)."""
        source = self.method(cls, name)
        if source is None:
            source = self._by_prefix(cls, name)
        if source is None:
            return None
        parts, pending, done = [source], re.findall(r"self\.(\w+)\(", source), set()
        while pending:
            callee = pending.pop()
            if callee in done:
                continue
            done.add(callee)
            found = self.method(cls, callee)
            if found is not None:
                parts.append(found)
                pending.extend(re.findall(r"self\.(\w+)\(", found))
        return "\n".join(parts)

    def _by_prefix(self, cls: str, name: str) -> str | None:
        candidates = [method for _, methods in self.classes.values() for method in methods
                      if name.startswith(method + "_") and method.startswith("test")]
        if not candidates:
            candidates = [method for _, methods in self.classes.values() for method in methods if method == name]
        if not candidates:
            return None
        best = max(candidates, key=len)
        for _, class_name in [("", cls), *self.classes]:
            found = self.method(class_name, best)
            if found is not None:
                return found
        return None


_ALLOWED_BREAKS = re.compile(r"^(\s*)with torch\._dynamo\.error_on_graph_break\(False\):\s*$", re.M)


def classify(text: str, nodeids: list[str], siblings: dict[str, str] | None = None) -> dict[str, Verdict]:
    """A verdict for each pytest node id (`file.py::Class::test_name`) of one file; `siblings`
    (module name -> text) are the modules of the same folder the file imports.

    In CPython's test files PyTorch wraps classes defined in a test in
    `with torch._dynamo.error_on_graph_break(False):` so that TorchDynamo may break there;
    the wrapping is set-up, not something the test checks, and is left out of the verdict."""
    if siblings is not None:
        text = _ALLOWED_BREAKS.sub(r"\1if True:", text)
        siblings = {name: _ALLOWED_BREAKS.sub(r"\1if True:", sibling) for name, sibling in siblings.items()}
    sources = TestSources(text, siblings)
    verdicts = {}
    for nodeid in nodeids:
        parts = nodeid.split("::")
        cls, name = (parts[1], parts[-1]) if len(parts) >= 3 else ("", parts[-1])
        source = sources.test_source(cls, name.split("[")[0])
        verdicts[nodeid] = judge(source) if source is not None else Verdict(False, ["source not found"])
    return verdicts
