"""What is measured: the tasks, the throughput probe, the fidelity texts (eval.* in params.yaml)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pipeline.schema.decision import Tolerance
from pipeline.schema.errors import FieldError


@dataclass(frozen=True)
class Languages:
    """A translation task's language pair, substituted into its prompt as {{source_language}} and
    {{target_language}} (pipeline/domain/tasks.py)."""
    source: str
    target: str


TASK_KINDS = ("generate", "classify", "lm_eval")
LOCAL_ONLY = ("config", "data", "fields", "labels", "languages")   # keys an lm-eval registry task cannot take


@dataclass(frozen=True)
class Task:
    """One entry of eval.tasks: a local task (an lm-eval task YAML + a JSONL file, kind generate or
    classify) or a task from lm-eval's own registry by name (`lm_eval: arc_easy`, kind lm_eval)."""
    kind: Literal["generate", "classify", "lm_eval"] | None = None    # None: lm_eval when `lm_eval` is given
    config: str | None = None
    data: str | None = None
    lm_eval: str | None = None             # a task name in lm-eval's registry
    include_path: str | None = None        # extra folder of lm-eval task YAMLs for `lm_eval`
    fields: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    languages: Languages | None = None
    limit: int | None = None
    tolerances: dict[str, Tolerance] = field(default_factory=dict)   # metric -> overrides decision.tolerances
    min_baseline: dict[str, float] = field(default_factory=dict)     # metric -> overrides decision.min_baseline

    def __post_init__(self) -> None:
        if self.kind is None:
            if self.lm_eval is None:
                raise FieldError("kind", f"required: one of {', '.join(TASK_KINDS)} "
                                         "(or give `lm_eval: <task name>` for a task from lm-eval's registry)")
            object.__setattr__(self, "kind", "lm_eval")
        if self.kind == "lm_eval":
            if not self.lm_eval:
                raise FieldError("lm_eval", "a task of kind lm_eval names a task of lm-eval's registry here")
            for key in LOCAL_ONLY:
                if getattr(self, key):
                    raise FieldError(key, f"not used by an lm-eval registry task (lm_eval: {self.lm_eval}); "
                                          "its YAML declares its data and prompt")
        else:
            for key in ("config", "data"):
                if not getattr(self, key):
                    raise FieldError(key, f"required for a {self.kind} task")
            for key in ("lm_eval", "include_path"):
                if getattr(self, key):
                    raise FieldError(key, f"only for kind lm_eval, this task is kind {self.kind}")
        if self.kind == "classify" and len(self.labels) < 2:
            raise FieldError("labels", "a classify task needs at least two labels")
        if self.limit is not None and self.limit < 1:
            raise FieldError("limit", f"must be >= 1 or null, got {self.limit}")


@dataclass(frozen=True)
class Throughput:
    batch_size: int = 4
    new_tokens: int = 32
    repeats: int = 1

    def __post_init__(self) -> None:
        for name in ("batch_size", "new_tokens", "repeats"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Fidelity:
    """Next-token distributions of each variant against the baseline's, teacher-forced on fixed texts
    (pipeline/scoring/estimators/fidelity.py). Report-only: shown beside the task verdicts, never gating them."""
    data: str                                   # a JSONL file; each text joins `fields` of one row
    fields: list[str] = field(default_factory=lambda: ["text"])
    limit: int = 32                             # texts
    max_tokens: int = 256                       # per text, after tokenization
    # the baseline's top-k kept per position; what vLLM compares on (prompt log-probs, at most its
    # --max-logprobs); the reference backend computes the full-vocabulary KL instead
    top_k: int = 20

    def __post_init__(self) -> None:
        if not self.fields:
            raise FieldError("fields", "name at least one field of the JSONL rows")
        for key in ("limit", "top_k"):
            if getattr(self, key) < 1:
                raise FieldError(key, f"must be >= 1, got {getattr(self, key)}")
        if self.top_k > 20:
            raise FieldError("top_k", f"vLLM serves at most 20 log-probs per position (its default "
                                      f"--max-logprobs), got {self.top_k}")
        if self.max_tokens < 2:
            raise FieldError("max_tokens", f"must be >= 2 (a text scores its tokens after the first), "
                                           f"got {self.max_tokens}")


@dataclass(frozen=True)
class LongContext:
    """Fidelity by token position (docs/fidelity.md "Long context"): each variant's next-token KL and top-1
    agreement against the baseline, teacher-forced on long texts, per position bucket (0-first_edge,
    then doubling, up to the smaller of `positions`, the model's context and memory.max_model_len), with
    t intervals over texts. A quantized KV mode is judged against the same tier with the baseline's KV
    cache: non-inferior in a bucket when the upper bound of its paired KL increase is within
    decision.kv_kl_tolerance. Measured on the reference backend and on vLLM on a CPU (its prompt log-probs,
    whose prefill reads the quantized cache: pipeline/evaluation/longctx.py engine_path); not on vLLM on a GPU."""
    data: str = "eval_sets/long_texts.jsonl"
    field: str = "text"
    texts: int = 3                              # the first rows; an interval over texts needs >= 2
    positions: int = 4096                       # tokens read per text (each text needs positions + 1)
    first_edge: int = 512
    top_k: int = 20                             # the baseline's top-k stored per position

    def __post_init__(self) -> None:
        if self.texts < 2:
            raise FieldError("texts", f"an interval over texts needs at least 2, got {self.texts}")
        for key in ("positions", "first_edge"):
            if getattr(self, key) < 2:
                raise FieldError(key, f"must be >= 2, got {getattr(self, key)}")
        if not 1 <= self.top_k <= 20:
            raise FieldError("top_k", f"must be within 1..20, got {self.top_k}")


PROBES = ("all", "passable")
UNPASSABLE = ("stop", "finish")


@dataclass(frozen=True)
class Strata:
    """A choice task's looks stratified by the baseline's label margin (pipeline/scoring/estimators/strata.py,
    docs/decisions/stratified-looks.md): the items whose margin is below `below` nats read in full by
    the cap, the others at `share`, each look the same share of both; the accuracy delta judged with
    the stratified estimate and its score interval."""
    below: float = 0.5
    share: float = 0.5

    def __post_init__(self) -> None:
        if not self.below > 0:
            raise FieldError("below", f"a margin in nats, > 0, got {self.below}")
        if not 0 < self.share <= 1:
            raise FieldError("share", f"a share of the high-margin items within (0, 1], got {self.share}")


@dataclass(frozen=True)
class Sequential:
    """Each variant's tasks evaluated in looks, each look a larger share of the task's `limit` (its cap),
    its verdicts read at the group-sequential confidence of that look (pipeline/scoring/verdict/sequential.py);
    a settled task stops, a failed gated metric stops the variant (docs/decision-rule.md "Looks")."""
    looks: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0])
    # passable: the report-only tasks and eval.long_context only on a variant that can still pass (none of
    # its gated metrics failed or left open at its cap): a variant recommended nowhere has no KV cache or
    # long prompt to vouch for (issue 38); all: on every variant, a failed one included
    probes: str = "passable"
    # stop: a variant that can no longer pass (a gated metric open at its cap or unstable) runs none of its
    # remaining gated tasks, as one that failed; finish: they run to their caps, their verdicts unchecked
    unpassable: str = "stop"
    # unset: every item of a choice task read alike, in one seeded order
    strata: Strata | None = None

    def __post_init__(self) -> None:
        f = self.looks
        if not f or any(b <= a for a, b in zip(f, f[1:])) or f[0] <= 0 or f[-1] != 1:
            raise FieldError("looks", f"shares of the cap, increasing within (0, 1] and ending at 1, got {f}")
        if self.probes not in PROBES:
            raise FieldError("probes", f"one of {', '.join(PROBES)}, got {self.probes!r}")
        if self.unpassable not in UNPASSABLE:
            raise FieldError("unpassable", f"one of {', '.join(UNPASSABLE)}, got {self.unpassable!r}")


@dataclass(frozen=True)
class Eval:
    tasks: dict[str, Task]
    batch_size: int = 8
    seed: int = 1234
    throughput: Throughput = field(default_factory=Throughput)
    fidelity: Fidelity | None = None            # unset: no fidelity stage, no KL columns
    # stage noise@<model>: the baseline re-evaluated under a second, equally valid arithmetic (reference:
    # serving.reference.noise_arithmetic; vLLM: another batch composition), each settled verdict read again
    # in it; false: verdicts on the run's arithmetic alone (docs/decision-rule.md "Engine noise")
    noise_floor: bool = True
    # unset: every variant runs every task to its limit, read once at the fixed confidence
    sequential: Sequential | None = None
    # unset: no fidelity by position (the KV cache judged on the tasks' prompt lengths only)
    long_context: LongContext | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise FieldError("batch_size", f"must be >= 1, got {self.batch_size}")

    # keys no longer read, each rejected with where it went (pipeline/schema/builder.py)
    RETIRED = {"apply_chat_template": "moved to models.<name>.apply_chat_template (auto | true | false, per "
                                      "model; auto: iff its tokenizer has a chat template)"}
