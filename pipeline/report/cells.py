"""Table cells and labels shared by the report's sections. Pure."""
from __future__ import annotations

from pipeline.domain.metrics import split_id
from pipeline.scoring.decision import Row, task_verdicts


METRIC_LABELS = {"bleu": "BLEU", "chrf": "chrF", "rouge1": "ROUGE-1", "rouge2": "ROUGE-2",
                 "rougeL": "ROUGE-L", "acc": "Accuracy", "macro_f1": "Macro-F1"}
MARK = {"pass": "pass", "fail": "**FAIL**", "inconclusive": "inconclusive"}


def label(mid: str, with_task: bool = True) -> str:
    """`translation BLEU` for `translation/bleu` (just `BLEU` without the task)."""
    task, metric = split_id(mid)
    name = METRIC_LABELS.get(metric, metric)
    return f"{task} {name}" if with_task and task else name


def tasks_of(rows: list[Row]) -> list[str]:
    """Task names in the order the rows report their metrics."""
    return list(dict.fromkeys(split_id(mid)[0] for r in rows for mid in r.metrics))


def shown_metrics(rows: list[Row], task: str) -> list[str]:
    """A task's metric ids for its table: the gated ones (with a verdict somewhere), else all."""
    mids = list(dict.fromkeys(mid for r in rows for mid in r.metrics if split_id(mid)[0] == task))
    gated = [mid for mid in mids if any(mid in r.verdicts for r in rows)]
    return gated or mids


def task_cell(r: Row, task: str, is_baseline: bool) -> str:
    if r.status != "ok":
        return "–"
    if not any(split_id(mid)[0] == task for mid in r.metrics):
        return "not measured"
    if is_baseline:
        return "baseline"
    verdict = task_verdicts(r.verdicts).get(task)
    return MARK.get(verdict, verdict) if verdict else "not gated"


def metric_cell(r: Row, metric: str, is_baseline: bool) -> str:
    if r.status != "ok":
        return "–"
    if metric not in r.metrics:
        return "not measured"
    value = f"{r.metrics[metric]:.1f}"
    if is_baseline:
        return f"{value} (baseline)"
    iv = r.intervals.get(metric)
    delta = r.deltas.get(metric)
    d = "n/a" if delta is None else f"{delta:+.1f}"
    if iv is not None:
        d += f" [{iv.lo:+.1f}, {iv.hi:+.1f}]"
    verdict = r.verdicts.get(metric)
    return f"{value} ({d}, {MARK[verdict[0]]})" if verdict else f"{value} ({d})"


def status_cell(r: Row) -> str:
    if r.status == "ok":
        return MARK.get(r.overall, r.overall)
    label = "unsupported here" if r.status == "unsupported" else r.status
    return f"{label}: {r.reason}" if r.reason else label


def md_row(cells: list[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |"



def ci(lo_hi: list[float], fmt: str) -> str:
    return f"[{format(lo_hi[0], fmt)}, {format(lo_hi[1], fmt)}]"
