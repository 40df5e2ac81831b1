"""What was measured of one variant, the first of a row's three hand-offs (scoring/verdict/rows.py):
its result.json as parsed, held whole, and what decide adds from the serving record and the params
(stages/decide_inputs.py build_row); nothing in it depends on another variant. Pure data.

    from pipeline.scoring.verdict.measured import Measured
    m = Measured(model, tier, kv, contract.load(path), scheme=..., hardware=...)
    m.metrics, m.looks, m.settled_at("classification/acc"), m.not_run_text("retrieval")
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.domain.sets.metrics import split_id
from pipeline.domain.result.contract import CANNOT_PASS, CHECKED, FAILED, NOT_NEEDED, ONE_ARITHMETIC, TIME_BUDGET, Result
from pipeline.domain.result.records import Settled
from pipeline.domain.result.serving_record import Repair
from pipeline.scoring.estimators import fidelity as fidelity_est

Key = tuple[str, str, str]          # (model, tier, kv)


# A per-metric verdict state beside pass | fail | inconclusive (margin.py): the metric's task was never
# run on the variant, so there is no evidence to be inconclusive about. It passes nothing (the pick reads
# it as not passing, as an inconclusive one), and every table, decision.json and the Why line name it.
NOT_RUN = "not run"
REFUSED = "refused"         # a task the server could not score (an endpoint without prompt log-probs)
# why a task was not run, as the report says it: (in full, in one word for page 1's cells, whose rows keep
# to a screen's width), keyed by result.json's not_run reasons (contract.NOT_RUN) and REFUSED. "moot":
# a gated metric open at its cap or unstable left the variant unable to pass, so its other tasks would
# change no verdict
NOT_RUN_WHY = {FAILED: ("the variant failed a gated metric first", "failed"),
               CANNOT_PASS: ("the variant could no longer pass", "moot"),
               TIME_BUDGET: ("the time budget ended", "budget"),
               REFUSED: ("the server refused log-likelihood", "refused")}


def _recorded(name: str, empty=None) -> property:
    """Result's field `name`, read through (`empty`, or a new one if callable, for a row with no result)."""
    return property(lambda self: getattr(self.result, name) if self.result is not None
                    else empty() if callable(empty) else empty, doc=f"result.json's `{name}` (Result.{name}).")


@dataclass(frozen=True)
class Measured:
    """What was measured of a variant: its result.json as parsed (`result`, held whole; None: it left
    none, `missing` says why) and what decide adds from the serving record and the params."""
    model: str
    tier: str
    kv: str
    result: Result | None = None
    missing: str | None = None                        # why there is no result (the row is failed)
    scheme: str = ""                                  # the tier's label, or its method
    hardware: str = "fp16"                            # vLLM kernel family (pipeline/data/vllm_hardware.yaml)
    weight_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    serve_path: str | None = None                     # what `vllm serve` is pointed at (the serving record)
    kv_formula: str | None = None                     # the planner's KV formula beside the engine's figure
    fidelity: fidelity_est.Read | None = None         # next-token KL / top-1 agreement vs the baseline
    repair: Repair | None = None                      # a repaired tier's search as quantize recorded it
    kv_skip_layers: tuple[int, ...] = ()              # layers the KV mode keeps in the model's dtype
    kv_repair: dict | None = None                     # a repaired KV mode's search as kvscales recorded it

    # result.json's records, as typed there (Result's comments say what each is)
    stopped, backend, seconds = _recorded("stopped"), _recorded("backend"), _recorded("seconds")
    metrics, higher_is_better = _recorded("metrics", dict), _recorded("higher_is_better", dict)
    num_samples, versions, phases = _recorded("num_samples", dict), _recorded("versions", dict), _recorded("phases", dict)
    not_run, refused, looks = _recorded("not_run", dict), _recorded("refused", dict), _recorded("looks", dict)
    measured_on, serving, throughput = _recorded("measured_on"), _recorded("serving"), _recorded("throughput")
    long_context, arithmetic_check = _recorded("long_context"), _recorded("arithmetic_check")
    tokenizer_check = _recorded("tokenizer_check")

    def __post_init__(self) -> None:
        # a dict or a stand-in where a record belongs would fail only where a reader uses it (decide's
        # end, or never in a test): build records with records.parse (tests: tests/result_files.py)
        for name, kind in RECORDS.items():
            found = getattr(self, name)
            if found is not None and not isinstance(found, kind):
                raise TypeError(f"Measured.{name}: a {kind.__name__}, got {type(found).__name__}")

    @property
    def status(self) -> str:
        """ok | failed | unsupported | not measured (contract.STATUSES); failed with no result."""
        return self.result.status if self.result is not None else "failed"

    @property
    def reason(self) -> str | None:
        """Why the row is not ok, or where a time budget cut its reads (result.json `cut`)."""
        return self.missing if self.result is None else self.result.reason or self.result.cut

    @property
    def compute_dtype(self) -> str | None:
        """The activation dtype the backend ran at, as evaluate recorded it."""
        found = self.result.compute_dtype if self.result is not None else None
        return str(found).replace("torch.", "") if found else None

    @property
    def tokens_per_s(self) -> float | None:
        """Batched greedy generation, where it was measured."""
        return self.throughput.gen_tokens_per_s if self.throughput is not None else None

    @property
    def task_seconds(self) -> dict[str, tuple[int, float]]:
        """task -> (samples computed, seconds computing them) in the stage (result.json sample_cache.tasks)."""
        counts = self.result.sample_cache if self.result is not None else None
        return {t: (v.computed, v.seconds) for t, v in counts.tasks.items()} if counts is not None else {}

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


# Measured's fields that hold a typed record (checked in Measured.__post_init__; the result's own are
# typed by its parser)
RECORDS = {"result": Result, "fidelity": fidelity_est.Read, "repair": Repair}
