"""The report's plots (pipeline/report/plots.py): context-length plots drawn one panel per tier, one line
per KV mode, a mode's colour the same in every plot; each writes a PNG."""
import pytest

from pipeline.report import plots
from pipeline.report.plots import Line

pytestmark = pytest.mark.unit


def test_a_panel_per_tier_in_row_order_and_the_baseline_s_kv_mode_coloured_first():
    lines = [Line("fp16", "fp8", [1], [0.1]), Line("int8", "auto", [1], [0.2]), Line("int8", "fp8", [1], [0.3]),
             Line("int4", "fp8-cal", [1], [0.4])]
    by_tier, colour = plots.panels(lines, "auto")
    assert list(by_tier) == ["fp16", "int8", "int4"]
    assert [line.kv for line in by_tier["int8"]] == ["auto", "fp8"]
    assert colour == {"auto": "C0", "fp8": "C1", "fp8-cal": "C2"}      # auto first though drawn second


def test_the_by_length_plot_has_an_axes_per_tier_and_a_line_per_kv_mode(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = {}
    monkeypatch.setattr(plt, "close", lambda fig: seen.setdefault("fig", fig))
    lines = [Line(t, kv, [1024, 2048], [100.0, 66.7]) for t in ("fp16", "int8", "fp8") for kv in ("auto", "fp8")]
    out = tmp_path / "p.png"
    plots._by_length(lines, out, "t", "x", "y", "auto")
    shown = [ax for ax in seen["fig"].axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["fp16", "int8", "fp8"]
    assert all([ln.get_label() for ln in ax.get_lines()] == ["KV auto", "KV fp8"] for ax in shown)
    assert all(ax.get_lines()[0].get_linestyle() == "-" and ax.get_lines()[1].get_linestyle() == "--" for ax in shown)
    assert out.stat().st_size > 1000


def test_quality_vs_memory_draws_a_panel_where_no_compared_variant_s_weights_are_known(tmp_path):
    """An endpoint's weights are on its server: where it is the only compared variant, its panel says so
    (decide ended with `max() arg is an empty sequence` before)."""
    from pipeline.scoring.estimators.stats import Interval
    from pipeline.scoring.verdict.rows import Evidence, Judgement, Row
    from tests import result_files

    facts = result_files.measured("served", backend="endpoint", serving={"base_url": "http://h:1", "served_model": "m"})
    served = Row(facts, Evidence({"t/acc": 0.0}, {"t/acc": Interval(0.0, -1.0, 1.0, 40)}), Judgement("pass"))
    out = tmp_path / "q.png"
    plots.quality_vs_memory([served], ["t/acc"], out, "t", {"t/acc": 3.0})
    assert out.stat().st_size > 1000
