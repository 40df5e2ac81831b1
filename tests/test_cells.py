"""A task's cell, rendered in one place for both tables that show one (pipeline/report/cells.py
task_cell): page 1's (the deciding verdict with its interval) and *Every variant*'s (the verdict and
the deltas that decided it). No model.

    .venv/bin/python -m pytest -n 0 -q tests/test_cells.py
"""
import ast
from pathlib import Path

from pipeline.report import cells
from pipeline.schema import Baseline
from tests.test_report import rows

REPORT = Path(__file__).resolve().parents[1] / "pipeline" / "report"


def test_one_row_in_both_forms():
    base, int4, unsupported = rows()
    b = Baseline(tier="fp16", kv="auto")
    assert cells.task_cell(int4, "classification", b) == "pass Accuracy -1.0"
    assert cells.task_cell(int4, "classification", None, interval=True) == "pass -1.0 [-2.0,+0.0] at 95%"
    assert cells.task_cell(base, "classification", b) == "baseline"
    assert cells.task_cell(unsupported, "classification", b) == "–"
    assert cells.task_cell(unsupported, "classification", None, interval=True) == "–"


def test_no_other_report_module_renders_a_task_cell():
    """page_one.cell and summary.decided_cell were two renderers of the same cell (and cells.task_cell,
    called by tests only, a third): a function of that kind outside cells.py is a second renderer."""
    found = [f"{name}:{n.name}" for name in ("page_one.py", "summary.py")
             for n in ast.walk(ast.parse((REPORT / name).read_text())) if isinstance(n, ast.FunctionDef)
             and n.name in ("cell", "decided_cell", "task_cell", "deciding", "flag")]
    assert found == []
