"""Table cells and labels shared by the report's sections. Pure."""
from __future__ import annotations

from pipeline.domain.sets import metric_registry
from pipeline.domain.sets.metrics import split_id
from pipeline.domain.result.contract import NOT_MEASURED
from pipeline.schema import Baseline
from pipeline.scoring.verdict.judge import FAIL, PASS, not_capable, overall
from pipeline.scoring.verdict.rows import NOT_RUN, Row


MARK = {"pass": "pass", "fail": "**FAIL**", "inconclusive": "inconclusive", NOT_RUN: NOT_RUN}
PLAIN = {**MARK, "fail": "FAIL"}      # page 1's table: no bold inside its cells
# a row that has no result to read: "unsupported" is what the engine refuses here, "not measured" a
# variant the time budget ended before its first look (served, never judged: not an engine limitation)
NOT_CAPABLE_CELL = "not capable"
STATUS_WORDS = {"unsupported": "unsupported here", NOT_MEASURED: "not measured (time budget)"}


def label(mid: str, with_task: bool = True) -> str:
    """`translation BLEU` for `translation/bleu` (just `BLEU` without the task)."""
    task, metric = split_id(mid)
    name = metric_registry.label(metric)
    return f"{task} {name}" if with_task and task else name


def task_of(mid: str) -> str:
    task, _ = split_id(mid)
    return task


def tasks_of(rows: list[Row]) -> list[str]:
    """Task names in the order the rows report their metrics."""
    return list(dict.fromkeys(task_of(mid) for r in rows for mid in r.facts.metrics))


def shown_metrics(rows: list[Row], task: str) -> list[str]:
    """A task's metric ids for its table: the gated ones (with a verdict somewhere), else all."""
    mids = list(dict.fromkeys(mid for r in rows for mid in r.facts.metrics if task_of(mid) == task))
    gated = [mid for mid in mids if any(mid in r.judgement.verdicts for r in rows)]
    return gated or mids


def is_baseline(r: Row, baseline: Baseline | None) -> bool:
    return baseline is not None and (r.facts.tier, r.facts.kv) == (baseline.tier, baseline.kv)


def deciding(r: Row, task: str):
    """(metric, verdict) that decided the task on the row: its worst verdict (None: no gated verdict)."""
    mine = {mid: v for mid, v in r.judgement.verdicts.items() if task_of(mid) == task and not not_capable(v)}
    order = {"fail": 0, "inconclusive": 1, NOT_RUN: 1, "pass": 2}
    return min(mine.items(), key=lambda kv: order.get(kv[1].verdict, 1)) if mine else None


def task_cell(r: Row, task: str, base: Baseline | None, interval: bool = False) -> str:
    """A task's cell, in both tables that have one. *Every variant* (summary.py): the task's verdict and
    the deltas of the metrics that decided it (`not capable`: the baseline cannot do the task, so no
    metric of it counts). Page 1 (`interval`, page_one.py, which shows the baseline's own row itself):
    the verdict of the metric that decided it, its delta and interval at its confidence, a not-run
    reason in a word or two (page 1's row keeps to a screen's width), and `–` where nothing is judged."""
    f = r.facts
    read = any(task_of(mid) == task for mid in f.metrics)
    if f.status != "ok":
        return "–"
    if interval:
        found = deciding(r, task)
        if found is not None:
            return decided_interval(r, *found)
        why = None if read else f.not_run_why(task)
        return f"{NOT_RUN} ({why[1]})" if why else "–" if read else unread(r, task)
    if not read:
        return unread(r, task)
    if is_baseline(r, base):
        return "baseline"
    mine = {mid: v for mid, v in r.judgement.verdicts.items() if task_of(mid) == task}
    counted = {mid: v for mid, v in mine.items() if not not_capable(v)}
    if not mine:        # no tolerance: its deltas shown, judged by nothing
        shown = [f"{label(mid, with_task=False)} {r.evidence.deltas[mid]:+.1f}" for mid in f.metrics
                 if task_of(mid) == task and mid in r.evidence.deltas]
        return "not gated" + (f": {', '.join(shown)}" if shown else "")
    if not counted:
        return NOT_CAPABLE_CELL
    verdict = overall(mine)
    wanted = {FAIL: (FAIL,), PASS: (PASS,)}.get(verdict, ("inconclusive",))
    deltas = r.evidence.deltas
    # unstable: settled in one arithmetic only (docs/decision-rule.md "Engine noise")
    parts = [(f"{label(mid, with_task=False)} {deltas[mid]:+.1f}" if mid in deltas
              else f"{label(mid, with_task=False)} n/a") + flag(v) for mid, v in counted.items() if v.verdict in wanted]
    return f"{MARK[verdict]} " + ", ".join(parts)


def decided_interval(r: Row, mid: str, v) -> str:
    """Page 1's form of the deciding verdict: `pass -1.4 [-2.8,-0.1] at 95.6%`."""
    if v.verdict == NOT_RUN:
        return f"{NOT_RUN} ({v.short})"
    shown = word(v, PLAIN)
    if v.lo is None:
        return f"{shown} (not measured)" if "not measured" in (v.note or "") else shown
    delta = r.evidence.deltas.get(mid)
    return f"{shown} {delta:+.1f} [{v.lo:+.1f},{v.hi:+.1f}] at {confidence(v)}" if delta is not None else shown


def flag(v) -> str:
    """An inconclusive verdict's reason when it was settled in one arithmetic only."""
    if v.unstable:
        return " (unstable)"
    return f" (unchecked {v.unchecked})" if v.unchecked else ""


def metric_cell(r: Row, metric: str, is_base: bool) -> str:
    f = r.facts
    if f.status != "ok":
        return "–"
    if metric not in f.metrics:
        return unread(r, task_of(metric))
    value = f"{r.score(metric):.1f}"
    if is_base:
        return f"{value} (baseline)"
    iv = r.evidence.intervals.get(metric)
    delta = r.evidence.deltas.get(metric)
    d = "n/a" if delta is None else f"{delta:+.1f}"
    if iv is not None:
        d += f" [{iv.lo:+.1f}, {iv.hi:+.1f}]"
    verdict = r.judgement.verdicts.get(metric)
    if verdict is None:
        return f"{value} ({d})"
    return f"{value} ({d}, {word(verdict)})"


def word(v, mark: dict[str, str] = MARK) -> str:
    """A verdict as a cell names it: 'unchecked pass', 'unstable' (both inconclusive), 'not run (<why>)',
    else its mark."""
    if v.verdict == NOT_RUN:
        return v.text()
    if v.unchecked:
        return f"unchecked {v.unchecked}"
    return "unstable" if v.unstable else mark[v.verdict]


def confidence(v) -> str:
    """A verdict's interval's confidence: 95%, or 98.2% for a look's repeated interval."""
    c = 100 * v.confidence
    if abs(c - round(c)) < 1e-6:
        return f"{c:.0f}%"
    # never rounded up to 100%: a look's 99.997% reads as itself, not as certainty
    digits = next((d for d in range(1, 6) if float(f"{c:.{d}f}") < 100), 6)
    return f"{c:.{digits}f}%"


def status_cell(r: Row) -> str:
    f = r.facts
    if f.status == "ok":
        return MARK.get(r.judgement.overall, r.judgement.overall)
    name = status_word(f.status)
    return f"{name}: {f.reason}" if f.reason else name


def status_word(status: str) -> str:
    """The words a row without a result is shown with (STATUS_WORDS), else its status."""
    return STATUS_WORDS.get(status, status)


def md_row(cells: list[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "/").replace("\n", " ") for c in cells) + " |"


def ci(lo_hi: list[float], fmt: str) -> str:
    return f"[{format(lo_hi[0], fmt)}, {format(lo_hi[1], fmt)}]"


def unread(r: Row, task: str) -> str:
    """A task with no score: 'not run (<why>)' where its gated verdicts are not run, or (a task with no
    gated metric) where the run says why (Measured.not_run_text), else 'not measured'."""
    mine = [v for mid, v in r.judgement.verdicts.items() if task_of(mid) == task]
    if mine and all(v.verdict == NOT_RUN for v in mine):
        return mine[0].text()
    return r.facts.not_run_text(task) or "not measured"
