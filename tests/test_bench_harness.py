"""The benchmark harness: medians, ratios and the results table (no timing asserted)."""
import itertools

from bench import harness


def test_medians_and_ratio_come_from_the_samples(monkeypatch):
    monkeypatch.setattr(harness, "WORKLOADS", {})
    counters = {side: itertools.count(1) for side in ("graphwright", "pytorch")}

    @harness.workload("toy")
    def toy(side):
        scale = 1.0 if side == "graphwright" else 4.0
        return lambda: scale * next(counters[side])

    result = harness.measure("toy", runs=3, warmup=1)
    # samples after one warm-up: 2, 3, 4 (graphwright) and 8, 12, 16 (pytorch)
    assert result.medians == {"graphwright": 3.0, "pytorch": 12.0}
    assert result.ratio == 0.25
    table = harness.format_table([result])
    assert "| toy | warm | 3000.000 | 12000.000 | 0.25x |" in table


def test_every_workload_file_registers():
    harness.load_workloads()
    assert "make_fx/transformer/symbolic/first" in harness.WORKLOADS
    assert harness.WORKLOADS["make_fx/mlp/fake/first"].cold


def test_a_workload_that_cannot_run_yet_is_skipped_with_its_reason(monkeypatch):
    monkeypatch.setattr(harness, "WORKLOADS", {})

    @harness.workload("not_yet")
    def not_yet(side):
        raise harness.Skip("cannot capture it yet")

    result = harness.measure("not_yet", runs=3, warmup=1)
    assert result.skipped == "cannot capture it yet" and result.ratio is None
    assert "| not_yet | warm |  |  | skipped: cannot capture it yet |" in harness.format_table([result])


def test_cold_start_and_real_model_workloads_register():
    harness.load_workloads()
    assert harness.WORKLOADS["coldstart/mlp"].cold
    assert harness.WORKLOADS["strict/hf-llama/capture"].cold
