"""What is measured: the tasks, the throughput probe, the fidelity texts (eval.* in params.yaml)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pipeline.schema.decision import Tolerance
from pipeline.schema.errors import FieldError


@dataclass(frozen=True)
class Languages:
    source: str
    target: str


TASK_KINDS = ("generate", "classify", "lm_eval")
LOCAL_ONLY = ("config", "data", "fields", "labels", "languages")   # keys an lm-eval registry task cannot take


@dataclass(frozen=True)
class Task:
    kind: Literal["generate", "classify", "lm_eval"] | None = None
    config: str | None = None
    data: str | None = None
    lm_eval: str | None = None
    include_path: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    languages: Languages | None = None
    limit: int | None = None
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    min_baseline: dict[str, float] = field(default_factory=dict)

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
    data: str
    fields: list[str] = field(default_factory=lambda: ["text"])
    limit: int = 32
    max_tokens: int = 256
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
    data: str = "eval_sets/long_texts.jsonl"
    field: str = "text"
    texts: int = 3
    positions: int = 4096
    first_edge: int = 512
    top_k: int = 20

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
    below: float = 0.5
    share: float = 0.5

    def __post_init__(self) -> None:
        if not self.below > 0:
            raise FieldError("below", f"a margin in nats, > 0, got {self.below}")
        if not 0 < self.share <= 1:
            raise FieldError("share", f"a share of the high-margin items within (0, 1], got {self.share}")


@dataclass(frozen=True)
class Sequential:
    looks: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0])
    probes: str = "passable"
    unpassable: str = "stop"
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
    fidelity: Fidelity | None = None
    noise_floor: bool = True
    sequential: Sequential | None = None
    long_context: LongContext | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise FieldError("batch_size", f"must be >= 1, got {self.batch_size}")

    # keys no longer read, each rejected with where it went (pipeline/schema/builder.py)
    RETIRED = {"apply_chat_template": "moved to models.<name>.apply_chat_template (auto | true | false, per "
                                      "model; auto: iff its tokenizer has a chat template)"}
