"""graphwright.check_nonstrict: each silent mistake of non-strict tracing is reported
with the user's line; a pure function gets a clean report."""
import random

import torch

import graphwright

HERE = __file__
weight = torch.ones(3, requires_grad=True)
buffer = torch.arange(3.0)
scale = 0.5
calls = 0


def line_of(fn, text: str) -> str:
    """`file:line` of the line in `fn`'s source containing `text`."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{HERE}:{first + offset}"


def test_pure_function_gets_a_clean_report():
    def pure(x, y):
        return (x @ y).relu().sum(dim=0)

    report = graphwright.check_nonstrict(pure, torch.randn(4, 3), torch.randn(3, 5))
    assert report.clean, str(report)
    assert "no findings" in str(report)


def test_global_tensor_that_requires_grad_is_reported_as_a_constant_without_gradient():
    def uses_global(x):
        return x * weight

    (finding,) = graphwright.check_nonstrict(uses_global, torch.randn(3)).of_kind("captured_constant")
    assert "`weight`" in finding.message and "never get a gradient" in finding.message
    assert finding.user_location == line_of(uses_global, "x * weight")


def test_closure_tensor_without_grad_is_reported_without_the_gradient_warning():
    offset = torch.tensor([1.0, 2.0, 3.0])

    def uses_closure(x):
        return x + offset

    (finding,) = graphwright.check_nonstrict(uses_closure, torch.randn(3)).of_kind("captured_constant")
    assert "`offset`" in finding.message and "gradient" not in finding.message


def test_tensor_literal_in_the_code_is_not_a_hidden_constant():
    def literal(x):
        return x + torch.tensor([1.0, 2.0, 3.0])

    assert graphwright.check_nonstrict(literal, torch.randn(3)).of_kind("captured_constant") == []


def test_non_tensor_input_is_reported_as_specialised():
    def scaled(x, factor):
        return x * factor

    (finding,) = graphwright.check_nonstrict(scaled, torch.randn(3), 3.14).of_kind("specialised_input")
    assert "`factor` = 3.14" in finding.message
    assert finding.user_location.startswith(f"{HERE}:")


def test_global_python_value_is_reported_as_baked_in_at_the_line_that_reads_it():
    def uses_scale(x):
        return x * scale

    (finding,) = graphwright.check_nonstrict(uses_scale, torch.randn(3)).of_kind("baked_global")
    assert "`scale` = 0.5" in finding.message
    assert finding.user_location == line_of(uses_scale, "x * scale")


def test_branch_on_a_size_is_reported_with_its_condition_and_line():
    def branchy(x):
        if x.shape[0] > 2:
            return x * 2
        return x

    findings = graphwright.check_nonstrict(branchy, torch.randn(5)).of_kind("size_assumption")
    assert [f.message.split("`")[1] for f in findings] == ["x.size()[0] > 2"]
    assert findings[0].user_location == line_of(branchy, "if x.shape[0] > 2")


def test_input_list_mutated_during_tracing_is_reported_at_the_mutating_line():
    def pops(lst):
        first = lst[0] * 2
        val = lst.pop()
        return first + val

    x = torch.randn(3)
    (finding,) = graphwright.check_nonstrict(pops, [x, x.clone()]).of_kind("input_mutation")
    assert finding.user_location == line_of(pops, "lst.pop()")


def test_input_dict_entry_added_in_a_helper_is_reported_in_the_helper():
    def remember(state, x):
        state["last"] = x

    def step(state, x):
        remember(state, x)
        return x + 1

    (finding,) = graphwright.check_nonstrict(step, {}, torch.randn(2)).of_kind("input_mutation")
    assert finding.user_location == line_of(remember, 'state["last"] = x')


def test_python_randomness_is_caught_by_the_differential_run():
    def noisy(x):
        return x * random.random()

    findings = graphwright.check_nonstrict(noisy, torch.randn(3)).of_kind("differential_mismatch")
    assert len(findings) == 1 and "hidden constant" in findings[0].message


def test_global_counter_is_caught_by_the_differential_run():
    def counted(x):
        global calls
        calls += 1
        return x * calls

    report = graphwright.check_nonstrict(counted, torch.randn(3))
    assert report.of_kind("differential_mismatch")


def test_report_is_stored_on_the_graph_module_and_the_graph_matches_eager():
    def f(x):
        return x.sin() + buffer

    report = graphwright.check_nonstrict(f, torch.randn(3))
    gm = report.graph_module
    assert gm.meta["nonstrict_report"] is report
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), f(x))


def test_keyword_arguments_are_inputs_too():
    def f(x, *, bias):
        return x + bias

    report = graphwright.check_nonstrict(f, torch.randn(3), bias=torch.randn(3))
    assert report.clean, str(report)


def test_report_text_lists_every_finding_with_location_and_hint():
    def f(x, n):
        return x * weight * n

    report = graphwright.check_nonstrict(f, torch.randn(3), 2)
    text = str(report)
    assert f"{len(report.findings)} finding(s)" in text
    assert {"captured_constant", "specialised_input"} <= {finding.kind for finding in report.findings}
    assert text.count("Hint:") == len(report.findings)
    assert text.count(f"{HERE}:") == len(report.findings)


def test_parameters_of_a_traced_module_are_named_and_flagged():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))
    findings = graphwright.check_nonstrict(model, torch.randn(4, 3)).of_kind("captured_constant")
    messages = sorted(finding.message for finding in findings)
    assert len(messages) == 2
    assert messages[0].startswith("tensor `0.bias` of the traced module")
    assert all("never get a gradient" in message for message in messages)
