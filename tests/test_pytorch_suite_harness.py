"""The harness that runs PyTorch's TorchDynamo tests on graphwright (tools/pytorch_suite):
its portability rules, and one run of a small test file of ours on both compilers."""
import pathlib
import subprocess
import sys
import textwrap

from tools.pytorch_suite.portability import classify, config_keys, judge

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]


def test_a_test_checking_values_and_graph_counts_is_portable():
    verdict = judge("""
    def test_add(self):
        cnt = CompileCounter()
        fn = torch.compile(lambda x: x + 1, backend=cnt)
        self.assertEqual(fn(x), x + 1)
        self.assertEqual(cnt.frame_count, 1)
    """)
    assert verdict.portable, verdict.reasons


def test_tests_of_torchdynamos_own_observables_are_not_portable():
    observables = {
        "counters": 'self.assertEqual(len(counters["graph_break"]), 1)',
        "graph text": "self.assertExpectedInline(normalize_gm(backend.graphs[0].print_readable(False)), '')",
        "guards": "guard_manager = torch._dynamo.guards.GuardManager()",
        "logs": "with self.assertLogs(logger, level='DEBUG'):",
        "internals": "from torch._dynamo.symbolic_convert import InstructionTranslator",
    }
    for name, line in observables.items():
        assert not judge(line).portable, name


def test_config_is_portable_only_where_graphwright_reads_the_same_key():
    assert config_keys("@torch._dynamo.config.patch(capture_scalar_outputs=True)") == {"capture_scalar_outputs"}
    assert judge("@torch._dynamo.config.patch(capture_scalar_outputs=True)").portable
    assert judge('with torch._dynamo.config.patch("recompile_limit", 2):').portable
    assert not judge("@torch._dynamo.config.patch(specialize_int=True)").portable
    assert not judge("torch._dynamo.config.inline_inbuilt_nn_modules = False").portable
    assert not judge("@torch.compiler.config.patch(dynamic_sources=\"L['x']\")").portable
    assert judge("@torch._inductor.config.patch(fallback_random=True)").portable  # the inductor backend reads it


def test_a_test_is_judged_with_the_helpers_it_calls_and_parametrized_names_find_their_source():
    text = textwrap.dedent("""
        class T:
            def _check(self, fn):
                self.assertExpectedInline(str(fn), "")

            def test_uses_helper(self):
                self._check(1)

            def test_param(self, op):
                pass
    """)
    verdicts = classify(text, ["f.py::T::test_uses_helper", "f.py::T::test_param_op_add", "f.py::T::test_gone"])
    assert not verdicts["f.py::T::test_uses_helper"].portable
    assert verdicts["f.py::T::test_param_op_add"].portable
    assert verdicts["f.py::T::test_gone"].reasons == ["source not found"]


def test_the_harness_runs_a_file_on_pytorch_and_on_graphwright(tmp_path):
    (tmp_path / "test_tiny.py").write_text(textwrap.dedent("""
        import torch
        import torch._dynamo.test_case
        import torch._dynamo.testing
        from torch._dynamo.exc import Unsupported


        class Tiny(torch._dynamo.test_case.TestCase):
            def test_values_and_counts(self):
                cnt = torch._dynamo.testing.CompileCounter()
                fn = torch.compile(lambda x: x.cos() * 2, backend=cnt)
                x = torch.randn(3)
                self.assertEqual(fn(x), x.cos() * 2)
                self.assertEqual(cnt.frame_count, 1)

            def test_graph_break_under_fullgraph(self):
                def fn(x):
                    torch._dynamo.graph_break()
                    return x + 1

                with self.assertRaises(Unsupported):
                    torch._dynamo.optimize("eager", nopython=True)(fn)(torch.randn(2))

            def test_which_compiler(self):
                self.assertNotIn("graphwright", torch.compile.__module__)
    """))
    done = subprocess.run([sys.executable, "-m", "tools.pytorch_suite", str(tmp_path), "--jobs", "0",
                           "--out", str(tmp_path / "out")], cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("test_tiny.py"))
    # 3 tests, all pass on PyTorch and are portable; the last one sees graphwright's compile
    assert row[1:5] == ["3", "3", "3", "2"], done.stdout
    details = (tmp_path / "out" / "test_tiny.py.tsv").read_text()
    assert "test_which_compiler\tpassed\tTrue\tfailed" in details, details


def test_cpython_files_are_edited_as_pytorch_edits_its_copies():
    from tools.pytorch_suite.cpython_files import convert

    edited = convert(textwrap.dedent("""\
        from __future__ import annotations
        import unittest
        from test import list_tests, support


        class ListTest(list_tests.CommonTest):
            pass


        class Other(unittest.TestCase):
            def test_local_classes(self):
                @staticmethod
                class A:
                    pass
                class B(A):
                    pass
                x = 1
                class C:
                    pass
    """), "test_x.py")
    assert edited.startswith("from __future__ import annotations\n# Generated")
    assert "__TestCase = CPythonTestCase" in edited
    assert "import list_tests\nfrom test import support" in edited
    assert "class Other(__TestCase):" in edited
    compile(edited, "test_x.py", "exec")
    # consecutive classes share one region where TorchDynamo may break the graph
    assert edited.count("with torch._dynamo.error_on_graph_break(False):") == 2
    assert "        with torch._dynamo.error_on_graph_break(False):\n            @staticmethod\n" in edited


def test_cpython_tests_find_their_source_in_the_helper_modules_they_inherit_from():
    seq_tests = "class CommonTest(__TestCase):\n    def test_len(self):\n        self.assertEqual(1, 1)\n"
    list_tests = ("class CommonTest(seq_tests.CommonTest):\n    def test_sort(self):\n"
                  "        with torch._dynamo.error_on_graph_break(False):\n            class K:\n                pass\n")
    text = "class ListTest(list_tests.CommonTest):\n    pass\n"
    verdicts = classify(text, ["t.py::ListTest::test_len", "t.py::ListTest::test_sort"],
                        {"list_tests": list_tests, "seq_tests": seq_tests})
    assert verdicts["t.py::ListTest::test_len"].portable
    # PyTorch's wrapping of local classes is set-up, not a check of TorchDynamo
    assert verdicts["t.py::ListTest::test_sort"].portable, verdicts["t.py::ListTest::test_sort"].reasons


def test_helper_modules_imported_through_the_test_package_are_siblings(tmp_path):
    from tools.pytorch_suite.__main__ import sibling_modules

    (tmp_path / "mapping_tests.py").write_text("import seq_tests\nclass BasicTestMappingProtocol:\n    pass\n")
    (tmp_path / "seq_tests.py").write_text("class CommonTest:\n    pass\n")
    # PyTorch's copies import a helper as `test.X` (redirected to the file X next to them)
    text = "from test import mapping_tests, support\nclass T(mapping_tests.BasicTestMappingProtocol):\n    pass\n"
    assert sorted(sibling_modules(tmp_path, text)) == ["mapping_tests", "seq_tests"]


def test_cpython_support_fills_in_what_python_3_11_lacks():
    from tools.pytorch_suite import cpython_support

    cpython_support.install()
    from test import support
    from test.support.testcase import ExceptionIsLikeMixin  # noqa: F401

    assert support.get_c_recursion_limit() > 1000
    with support.suppress_immortalization():
        pass
    assert iter(support.BrokenIter()) is not None
