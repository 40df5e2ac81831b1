"""lm-eval on a session's model: the tasks' scores and per-sample rows, all tasks at once or one at a
time within the time budget left (serving.vllm.budget.max_wall_s), and result.json's flat metrics."""
from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from pipeline.engines.base import Unsupported
from pipeline.evaluation import blank_answers
from pipeline.domain.sets import task_rows, tasks
from pipeline.domain.sets.metrics import metric_id
from pipeline.schema import Eval
from pipeline.domain.sets.sample_row import SampleRow


def run_tasks(session, specs: list[tasks.TaskSpec], ev: Eval,
              raw_samples=None) -> tuple[dict[str, task_rows.TaskResult], dict[str, list[SampleRow]]]:
    """lm-eval on the session's model: (task -> its result, task -> per-sample rows). `raw_samples`, if
    given, receives lm-eval's own logged samples per task (benchmarks count tokens from them). A
    generated answer that came back blank is asked again without its stop strings (blank_answers);
    its row is flagged task_rows.REASKED."""
    import lm_eval  # lazy: seconds of imports, kept out of argument and params errors
    from lm_eval.tasks import TaskManager

    reasked = blank_answers.reasking(session.lm)
    reasked.clear()
    out = lm_eval.simple_evaluate(
        model=session.lm,
        # every task arrives built (a config dict or a registry Task): lm-eval's default manager would
        # index its ~10,000 task YAMLs first, 4 s per variant for nothing
        task_manager=TaskManager(include_defaults=False),
        tasks=[tasks.in_prompt_format(s.config, session.chat) for s in specs],
        # sorted: lm-eval 0.4.13 numbers the selected documents in data order and logs doc_id as
        # samples[k] (evaluator.py, doc_id_true), right only if the list is sorted
        samples={s.lm_eval_name: selected(s) for s in specs},
        apply_chat_template=session.chat,      # the model's own prompt format (models.<name>.apply_chat_template)
        bootstrap_iters=0,
        log_samples=True,
        random_seed=ev.seed, numpy_random_seed=ev.seed, torch_random_seed=ev.seed, fewshot_random_seed=ev.seed,
    )
    if reasked:     # the stage log's record of what the second requests cost
        print(f"qtier: {len(reasked)} answer(s) opened with a blank line and were asked again without the stop")
    found: dict[str, task_rows.TaskResult] = {}
    for s in specs:
        rows = sorted(out["samples"][s.lm_eval_name], key=lambda r: r["doc_id"])
        for r in rows:
            if r.get("arguments") and (s.lm_eval_name, r["arguments"][0][0]) in reasked:
                r[task_rows.REASKED] = True
        found[s.name] = task_rows.task_result(s, out["results"][s.lm_eval_name], rows)
        if raw_samples is not None:
            raw_samples({s.name: rows})
    return found, {name: r.rows for name, r in found.items()}


def selected(spec: tasks.TaskSpec) -> list[int]:
    """The row indices lm-eval is given, sorted (see run_tasks); none is a bug: lm-eval would read all."""
    if not spec.doc_ids:
        raise ValueError(f"{spec.name}: no documents selected")
    return sorted(spec.doc_ids)


def flat(found: dict[str, task_rows.TaskResult]) -> tuple[dict[str, float], dict[str, bool]]:
    """(`<task>/<metric>` -> score, `<task>/<metric>` -> higher_is_better) for result.json."""
    scores = {metric_id(t, m): v for t, r in found.items() for m, v in r.metrics.items()}
    hib = {metric_id(t, m): v for t, r in found.items() for m, v in r.higher_is_better.items()}
    return scores, hib


class WallBudgetExceeded(Exception):
    pass


class NotMeasured(Exception):
    """The time budget ended before any task (or a variant's first look) finished: the variant was not
    measured. Not Unsupported: the engine serves it, this run gave it too little time. The message
    is the reason result.json and the page give (status "not measured")."""


def before_first_look(e: WallBudgetExceeded) -> NotMeasured:
    return NotMeasured(f"the time budget ended before its first look: lm-eval {e}")


@contextmanager
def wall_limit(seconds: float | None) -> Iterator[None]:
    """Raise WallBudgetExceeded in this (main) thread after `seconds`; None or off the main thread: no limit."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):  # noqa: ARG001
        raise WallBudgetExceeded(f"did not finish in the {seconds:.0f} s left of serving.vllm.budget.max_wall_s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_within(session, specs: list[tasks.TaskSpec], ev: Eval, seconds: float | None, run=run_tasks
               ) -> tuple[dict[str, task_rows.TaskResult], dict[str, list[SampleRow]], str | None]:
    """run_tasks one task at a time within `seconds` (None: no limit): past it, the tasks finished are
    kept and the cut says which were not measured. No task finished: NotMeasured."""
    if seconds is None:     # one call: lm-eval batches every task's requests of a kind together
        return (*run(session, specs, ev), None)
    metrics: dict[str, task_rows.TaskResult] = {}
    samples: dict[str, list[SampleRow]] = {}
    t0 = time.monotonic()
    try:
        with wall_limit(seconds):
            for spec in specs:
                found, rows = run(session, [spec], ev)
                metrics.update(found)
                samples.update(rows)
    except WallBudgetExceeded as e:
        if not metrics:
            raise before_first_look(e) from None
        missed = [s.name for s in specs if s.name not in metrics]
        return metrics, samples, (f"the time budget ended: lm-eval stopped after {time.monotonic() - t0:.0f} s "
                                  f"(serving.vllm.budget.max_wall_s); not measured: {', '.join(missed)}")
    return metrics, samples, None


def without_refused(specs: list[tasks.TaskSpec], refusal: str | None, result: dict) -> list[tasks.TaskSpec]:
    """The tasks the server can score: without prompt log-probs (refusal: why) the log-likelihood ones
    are dropped and result["refused"] names them, never scored at chance. Nothing left: Unsupported."""
    if not refusal:
        return specs
    kept = [s for s in specs if not tasks.is_loglik(s)]
    result["refused"] = {s.name: refusal for s in specs if tasks.is_loglik(s)}
    if not kept:
        raise Unsupported(refusal)
    return kept
