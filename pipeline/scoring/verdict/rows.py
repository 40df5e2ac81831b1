"""One variant's row, in three hand-offs made by three steps of stage decide. Pure data.

  Measured   what was measured: evaluate's result.json and the serving checkpoint's record, as
             written (decide.build_row); nothing in it depends on another variant
  Evidence   the paired comparison with the row's baseline: deltas, intervals, power (comparison.compare)
  Judgement  the verdicts the decision rule gives that evidence (decision.judge)

A Row holds the three; the report reads rows, the rule never reads what only the report shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.domain.result_json import CANNOT_PASS, CHECKED, FAILED, NOT_NEEDED, ONE_ARITHMETIC, TIME_BUDGET
from pipeline.domain.metrics import split_id
from pipeline.domain.result_facts import LongContext, MeasuredOn, Serving, Throughput, TokenizerCheck
from pipeline.domain.result_records import ArithmeticCheck, Settled, TaskLooks
from pipeline.domain.serving_record import Repair
from pipeline.scoring.estimators import fidelity as fidelity_est
from pipeline.scoring.planning.power import Power
from pipeline.scoring.estimators.stats import Interval

Key = tuple[str, str, str]          # (model, tier, kv)

# A per-metric verdict state beside pass | fail | inconclusive (margin.py): the metric's task was never
# run on the variant, so there is no evidence to be inconclusive about. It passes nothing (the pick reads
# it as not passing, as an inconclusive one), and every table, decision.json and the Why line name it.
NOT_RUN = "not run"
REFUSED = "refused"         # a task the server could not score (an endpoint without prompt log-probs)
# why a task was not run, as the report says it: (in full, in one word for page 1's cells, whose rows keep
# to a screen's width), keyed by result.json's not_run reasons (result_json.NOT_RUN) and REFUSED. "moot":
# a gated metric open at its cap or unstable left the variant unable to pass, so its other tasks would
# change no verdict
NOT_RUN_WHY = {FAILED: ("the variant failed a gated metric first", "failed"),
               CANNOT_PASS: ("the variant could no longer pass", "moot"),
               TIME_BUDGET: ("the time budget ended", "budget"),
               REFUSED: ("the server refused log-likelihood", "refused")}


@dataclass(frozen=True)
class Measured:
    model: str
    tier: str
    kv: str
    status: str                                       # ok | failed | unsupported | not measured (result_json)
    reason: str | None = None
    stopped: str | None = None                        # the look where a gated metric failed (result.json)
    backend: str | None = None
    compute_dtype: str | None = None                  # activation dtype the backend ran at
    scheme: str = ""                                  # the tier's label, or its method
    hardware: str = "fp16"                            # vLLM kernel family (pipeline/data/vllm_hardware.yaml)
    metrics: dict[str, float] = field(default_factory=dict)            # `<task>/<metric>` -> score
    higher_is_better: dict[str, bool] = field(default_factory=dict)    # same keys, from the task YAMLs
    weight_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    tokens_per_s: float | None = None                 # batched greedy generation where it was measured
    serve_path: str | None = None                     # what `vllm serve` is pointed at (the serving record)
    num_samples: dict[str, int] = field(default_factory=dict)          # task -> samples evaluated
    versions: dict[str, str] = field(default_factory=dict)             # package -> version (evaluate's env)
    measured_on: MeasuredOn | None = None             # result.json "measured_on"; None: not recorded
    # evaluate's records as typed in result.json (most of serving depends on the engine); serving is None
    # when the variant left no result
    serving: Serving | None = None
    throughput: Throughput | None = None
    kv_formula: str | None = None                     # the planner's KV formula beside the engine's figure
    fidelity: fidelity_est.Read | None = None         # next-token KL / top-1 agreement vs the baseline
    looks: dict[str, TaskLooks] = field(default_factory=dict)          # task -> its looks (eval.sequential)
    seconds: float | None = None                      # the stage that measured it (the baseline's: stage baseline)
    long_context: LongContext | None = None           # fidelity by position (result.json; eval.long_context)
    # task -> (samples computed, seconds computing them) in this stage (result.json sample_cache.tasks)
    task_seconds: dict[str, tuple[int, float]] = field(default_factory=dict)
    # part of the evaluation -> seconds (result.json "phases": load, tasks, fidelity, long_context, throughput)
    phases: dict[str, float] = field(default_factory=dict)
    # task -> why evaluate did not run it (result_json.NOT_RUN: failed, cannot pass, time budget)
    not_run: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)            # task -> why the server could not score it
    # the settled verdicts checked under the engine's second arithmetic (result.json; scoring/verdict/arith_check.py)
    arithmetic_check: ArithmeticCheck | None = None
    tokenizer_check: TokenizerCheck | None = None     # prepare's, as evaluate read it; None: not recorded
    repair: Repair | None = None                      # a repaired tier's search as quantize recorded it

    def __post_init__(self) -> None:
        # a dict or a stand-in where a record belongs would fail only where a reader uses it (decide's
        # end, or never in a test): build records with result_records.parse (tests: tests/result_files.py)
        for name, kind in RECORDS.items():
            found = getattr(self, name)
            if found is not None and not isinstance(found, kind):
                raise TypeError(f"Measured.{name}: a {kind.__name__}, got {type(found).__name__}")
        if bad := [t for t, lk in self.looks.items() if not isinstance(lk, TaskLooks)]:
            raise TypeError(f"Measured.looks[{bad[0]!r}]: a TaskLooks, got {type(self.looks[bad[0]]).__name__}")

    def second(self, metric: str) -> tuple[str, str] | None:
        """(the metric's verdict under the second arithmetic, that arithmetic) where evaluate checked it."""
        c = self.arithmetic_check.metrics.get(metric) if self.arithmetic_check else None
        if c is None or c.status is None:
            return None
        return c.second, self.arithmetic_check.arithmetic or "the second arithmetic"

    def check_expected(self) -> bool:
        """Whether this variant's settled verdicts needed the second arithmetic's check: it was run or
        not needed (result.json arithmetic_check status checked or not needed), so a settled verdict it
        did not read is unchecked. Skipped or impossible: the verdicts rest on one arithmetic."""
        return self.arithmetic_check is not None and self.arithmetic_check.status in (CHECKED, NOT_NEEDED)

    def one_arithmetic(self) -> str | None:
        """Why this variant's verdicts rest on the run's arithmetic alone (the check skipped by the user
        or impossible here), None where the check ran or was not needed."""
        c = self.arithmetic_check
        return f"{c.status}: {c.why}" if c is not None and c.status in ONE_ARITHMETIC else None

    def look_confidence(self, task: str) -> float | None:
        """The confidence of the task's last look (its repeated interval's), None for a fixed-n task."""
        lk = self.looks.get(task)
        return lk.confidence if lk is not None else None

    def reach(self, task: str) -> tuple[int, int] | None:
        """(the most items the task's looks read by the cap, the pool they read from), None for a
        fixed-n task. A stratified read reaches only part of its pool."""
        lk = self.looks.get(task)
        return lk.reach() if lk is not None else None

    def settled_at(self, metric: str) -> Settled | None:
        """Where evaluate settled a metric in the run's arithmetic, with the interval it read (None:
        open at the task's last look, or a fixed-n task): decide's verdict is read from it."""
        task, name = split_id(metric)
        lk = self.looks.get(task)
        return lk.read_on(name) if lk is not None else None

    def look_text(self, task: str, at: Settled | None = None) -> str | None:
        """Where the task stopped, or the metric settled (`at`): 'look 2 of 4, 160 of 320 samples'; None
        for a fixed-n task."""
        lk = self.looks.get(task)
        if lk is None or lk.of is None:
            return None
        look, n = (at.look, at.n) if at is not None else (lk.looks, lk.n)
        text = f"look {look} of {lk.of}, {n:,} of {lk.cap:,} samples"
        return f"{text}; stopped by the time budget" if lk.budget and at is None else text

    def not_run_why(self, task: str) -> tuple[str, str] | None:
        """Why a task has no score, (in full, in short) (NOT_RUN_WHY), where the run says it was never
        run: evaluate's not_run record, the server's refusal, a failed look or a time budget that ended
        the variant's tasks (a fixed-n read cut: `reason`). None: no record says so."""
        key = self.not_run.get(task) or (REFUSED if task in self.refused else None)
        if key is None and self.stopped:
            key = FAILED
        if key is not None:
            full, short = NOT_RUN_WHY.get(key, (key, key))
            return (f"{full}: {self.refused[task]}" if key == REFUSED else full), short
        # an ok row's reason is where the time budget cut its reads (decide_inputs: result.json `cut`; a
        # fixed-n read, lm_eval_runner.run_within, records no task by task not_run): the tasks after it
        return (self.reason, NOT_RUN_WHY[TIME_BUDGET][1]) if self.reason else None

    def not_run_text(self, task: str) -> str | None:
        """'not run (<why>)' for a task the variant never ran (not_run_why), else None."""
        why = self.not_run_why(task)
        return f"{NOT_RUN} ({why[0]})" if why else None

    def budget_cut(self) -> str | None:
        """Where a time budget ended the looks ('look 2 of 4 of classification, ...'), from the looks
        evaluate recorded; None where none did."""
        cut = [f"look {lk.looks} of {lk.of} of {t}" for t, lk in self.looks.items() if lk.budget]
        late = [t for t, why in self.not_run.items() if why == TIME_BUDGET]
        if not cut and not late:
            return None
        return "stopped by the time budget" + (f" at {', '.join(cut)}" if cut else "") + (
            f"; not run: {', '.join(late)}" if late else "")

    @property
    def key(self) -> Key:
        return (self.model, self.tier, self.kv)

    @property
    def variant(self) -> str:
        return f"{self.tier}-{self.kv}"


# Measured's fields that hold a typed record (checked in Measured.__post_init__)
RECORDS = {"measured_on": MeasuredOn, "serving": Serving, "throughput": Throughput, "fidelity": fidelity_est.Read,
           "long_context": LongContext, "arithmetic_check": ArithmeticCheck, "tokenizer_check": TokenizerCheck,
           "repair": Repair}


@dataclass(frozen=True)
class Evidence:
    deltas: dict[str, float] = field(default_factory=dict)         # metric -> tier - baseline
    intervals: dict[str, Interval] = field(default_factory=dict)   # metric -> its paired interval
    power: dict[str, Power] = field(default_factory=dict)          # gated metric -> power at this n
    # metric -> the tier's score on the baseline's items: the baseline's score + the delta (the estimate
    # that decided: a read stopped at a look, or stratified, is not the plain mean of what it read)
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Settle:
    """How many samples would settle an inconclusive verdict if the observed effect held, in items read
    by the task's design; `readable`, `pool`: the most items that design reads, from a pool of that many
    (a task read in looks; a stratified one reads only part of its pool), None for a fixed-n task."""
    samples: int | None              # None: the estimate sits on the tolerance
    outcome: str                     # pass | fail
    readable: int | None = None
    pool: int | None = None

    def beyond(self) -> bool:
        """More items than the design can read from its pool."""
        return self.samples is not None and self.readable is not None and self.samples > self.readable

    def pool_needed(self) -> int | None:
        """The pool that would let the design read `samples` (its read share kept)."""
        if not self.beyond() or not self.pool:
            return None
        return math.ceil(self.samples * self.pool / self.readable)

    def text(self) -> str:
        if self.samples is None:
            return "the estimate sits on the tolerance, so no sample size settles it"
        text = f"at this effect size about {self.samples:,} items read would be needed to {self.outcome}"
        if self.beyond():
            text += (f", more than this design reads ({self.readable:,} of the {self.pool:,}-item pool): a pool "
                     f"of about {self.pool_needed():,} items")
        return text

    def short(self) -> str:
        """The cell's form: 'about 57 samples to pass', with the pool it would take where that is more."""
        if self.samples is None:
            return "on the tolerance: no n settles it"
        text = f"about {self.samples:,} samples to {self.outcome}"
        return text + (f" (more than the {self.readable:,} this design reads: a pool of about "
                       f"{self.pool_needed():,})" if self.beyond() else "")


@dataclass(frozen=True)
class Verdict:
    """One metric's verdict. With an interval: its bounds oriented so that a drop is negative, the
    allowed drop and n; without one, `note` says why there is no verdict on the evidence."""
    verdict: str                     # pass | fail | inconclusive | not run (NOT_RUN: `note` says why)
    note: str | None = None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None
    limit: float | None = None
    settle: Settle | None = None
    confidence: float = 0.95         # of the interval (decision.confidence)
    second: tuple[str, str] | None = None   # (its verdict under the engine's second arithmetic, that arithmetic)
    unstable: str | None = None      # the run's verdict, when the second arithmetic does not give it
    look: str | None = None          # the look it was read at (eval.sequential), e.g. "look 2 of 4, ..."
    unchecked: str | None = None     # the run's verdict, when the second arithmetic was not read for it
    short: str | None = None         # a not-run verdict's why in a word or two (page 1's cells)

    @classmethod
    def not_run(cls, why: tuple[str, str]) -> "Verdict":
        """The verdict of a metric whose task was never run: `why` (in full, in short), Measured.not_run_why."""
        return cls(NOT_RUN, why[0], short=why[1])

    def text(self) -> str:
        """'not run (the variant failed a gated metric first)' for a not-run verdict, else its state."""
        return f"{NOT_RUN} ({self.note})" if self.verdict == NOT_RUN else self.verdict

    @property
    def why(self) -> str:
        """The one-line reason, as decision.json records it."""
        if self.note is not None:
            return self.note
        kind = "repeated interval" if self.look is not None else "interval"
        ci = f"{confidence_text(self.confidence)} {kind} [{self.lo:+.2f}, {self.hi:+.2f}] (n={self.n})"
        shown = self.unchecked or self.unstable or self.verdict
        relation = {"pass": "lies above", "fail": "lies below"}.get(shown, "straddles")
        text = f"{ci} {relation} -{self.limit:.2f}"
        if self.unchecked is not None:
            text = (f"unchecked {self.unchecked}: not read in the engine's second arithmetic (evaluate stops "
                    f"checking once a variant cannot pass), so it counts as inconclusive; {text}")
        elif self.unstable is not None:
            text = (f"unstable: {self.unstable} in the run's arithmetic, {self.second[0]} under "
                    f"{self.second[1]}; {text}")
        elif self.second is not None:
            text += f"; the same under {self.second[1]}"
        if self.look is not None:
            text += f" (read at {self.look})"
        return f"{text}; {self.settle.text()}" if self.settle is not None else text


def confidence_text(c: float) -> str:
    """95%, or 99.69% for a look's repeated interval."""
    return f"{c:.0%}" if abs(c * 100 - round(c * 100)) < 1e-6 else f"{c:.2%}"


@dataclass(frozen=True)
class Judgement:
    # pass | fail | inconclusive | not run (no gated metric ran) | baseline | failed | unsupported | not measured
    overall: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)     # gated metric -> verdict


@dataclass(frozen=True)
class Row:
    facts: Measured
    evidence: Evidence
    judgement: Judgement

    @property
    def key(self) -> Key:
        return self.facts.key

    @property
    def variant(self) -> str:
        return self.facts.variant

    def score(self, metric: str) -> float | None:
        """The score the page shows: the estimate the delta beside it comes from (Evidence.scores), else
        the mean over what was read (the baseline; a metric with no baseline to pair with)."""
        return self.evidence.scores.get(metric, self.facts.metrics.get(metric))
