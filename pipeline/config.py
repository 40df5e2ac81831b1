"""Typed loader for params.yaml. Every error names the offending key and exits non-zero.

    python -m pipeline.config            # validate params.yaml and print the variants
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


@dataclass(frozen=True)
class KvMode:
    cache_dtype: str
    scale: float = 1.0


@dataclass(frozen=True)
class Calibration:
    path: str
    text_field: str = "text"
    num_samples: int = 32
    max_seq_len: int = 256


@dataclass(frozen=True)
class Task:
    config: str
    data: str
    kind: Literal["generate", "classify"]
    fields: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    limit: int | None = None


@dataclass(frozen=True)
class Throughput:
    batch_size: int = 4
    new_tokens: int = 32
    repeats: int = 1


@dataclass(frozen=True)
class Eval:
    tasks: dict[str, Task]
    batch_size: int = 8
    apply_chat_template: bool = True
    seed: int = 1234
    throughput: Throughput = field(default_factory=Throughput)


@dataclass(frozen=True)
class Reference:
    dtype: Literal["float32", "bfloat16"] = "float32"
    num_threads: int = 0


@dataclass(frozen=True)
class VllmBench:
    concurrency: list[int] = field(default_factory=lambda: [1, 4])
    num_prompts: int = 16
    input_len: int = 128
    output_len: int = 32
    seed: int = 1234


@dataclass(frozen=True)
class Vllm:
    python: str = ".venv-vllm/bin/python"      # the vLLM environment (scripts/install.sh --vllm-cpu / --vllm)
    device: Literal["auto", "cpu", "gpu"] = "auto"
    dtype: str = "auto"                         # auto: GPU model dtype; CPU float32, bfloat16 if quantized
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


@dataclass(frozen=True)
class Serving:
    backend: Literal["auto", "reference", "vllm"] = "reference"
    reference: Reference = field(default_factory=Reference)
    vllm: Vllm = field(default_factory=Vllm)


@dataclass(frozen=True)
class Tolerance:
    abs: float | None = None
    rel: float | None = None


@dataclass(frozen=True)
class Baseline:
    tier: str
    kv: str = "auto"


@dataclass(frozen=True)
class Bootstrap:
    resamples: int = 1000
    seed: int = 12345
    confidence: float = 0.95


@dataclass(frozen=True)
class Decision:
    baseline: Baseline
    tolerances: dict[str, Tolerance]
    min_baseline: dict[str, float] = field(default_factory=dict)
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    length_buckets: list[int] = field(default_factory=lambda: [0, 400, 800])
    regressions_per_task: int = 5


@dataclass(frozen=True)
class TargetGpu:
    memory_gib: float
    bandwidth_gbps: float
    compute_capability: float


@dataclass(frozen=True)
class Memory:
    target_gpus: dict[str, TargetGpu]
    max_model_len: int = 4096
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    activation_peak_gib: float = 1.0
    non_torch_overhead_gib: float = 0.5


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

    def variants(self) -> list[tuple[str, str, str]]:
        return [(m, t, k) for m in self.models for t in self.tiers for k in self.kv_modes]


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
    return cls(**kwargs)


# --- semantic checks -----------------------------------------------------------------------

def _check_name(kind: str, name: str) -> None:
    if not NAME_RE.match(name):
        raise ConfigError(
            f"{kind}.{name}: names must be lower-case letters, digits, '.', '_' and single '-' "
            "(they become DVC stage and file names)"
        )


def validate(p: Params, root: Path) -> None:
    if not p.models:
        raise ConfigError("models: at least one model is required")
    for kind, names in (("models", p.models), ("tiers", p.tiers), ("kv_modes", p.kv_modes)):
        for n in names:
            _check_name(kind, n)
    for name, m in p.models.items():
        _check_source(f"models.{name}.source", m.source, root)
    for name, t in p.tiers.items():
        key = f"tiers.{name}"
        if t.method not in METHODS:
            close = difflib.get_close_matches(t.method, METHODS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{key}.method: unknown method {t.method!r}{hint}; known: {', '.join(METHODS)}")
        if t.method in RECIPE_METHODS:
            if not t.recipe:
                raise ConfigError(f"{key}.recipe: method {t.method!r} needs a recipe file")
            if not (root / t.recipe).is_file():
                raise ConfigError(f"{key}.recipe: file not found: {t.recipe}")
            if t.weight_bits not in (4, 8):
                raise ConfigError(f"{key}.weight_bits: expected 4 or 8, got {t.weight_bits!r}")
        if t.method in BNB_METHODS and t.recipe:
            raise ConfigError(f"{key}.recipe: bitsandbytes tiers quantize at load time and take no recipe")
        if t.method != "baseline":
            if t.hardware is None:
                raise ConfigError(f"{key}.hardware: required: which vLLM kernel family serves this tier "
                                  f"(one of {', '.join(hardware_kinds())})")
        if t.hardware is not None and t.hardware not in hardware_kinds():
            raise ConfigError(f"{key}.hardware: unknown kind {t.hardware!r}; known: {', '.join(hardware_kinds())}")
        if isinstance(t.group_size, int) and t.group_size <= 0:
            raise ConfigError(f"{key}.group_size: must be positive, got {t.group_size}")
    for name, kv in p.kv_modes.items():
        if kv.cache_dtype not in KV_DTYPES:
            raise ConfigError(f"kv_modes.{name}.cache_dtype: {kv.cache_dtype!r} is not one of {KV_DTYPES}")
        if kv.scale <= 0:
            raise ConfigError(f"kv_modes.{name}.scale: must be positive, got {kv.scale}")
    c = p.calibration
    if not (root / c.path).is_file():
        raise ConfigError(f"calibration.path: file not found: {c.path}")
    if c.num_samples < 1 or c.max_seq_len < 8:
        raise ConfigError("calibration.num_samples/max_seq_len: must be >= 1 and >= 8")
    if not p.eval.tasks:
        raise ConfigError("eval.tasks: at least one task is required")
    from pipeline.public_sets import is_public

    for name, task in p.eval.tasks.items():
        key = f"eval.tasks.{name}"
        for attr in ("config", "data"):
            if attr == "data" and is_public(task.data):
                continue        # a public set: checked by tasks.check_data below
            if not (root / getattr(task, attr)).is_file():
                raise ConfigError(f"{key}.{attr}: file not found: {getattr(task, attr)}")
        if task.kind == "classify" and len(task.labels) < 2:
            raise ConfigError(f"{key}.labels: a classify task needs at least two labels")
        if task.limit is not None and task.limit < 1:
            raise ConfigError(f"{key}.limit: must be >= 1 or null, got {task.limit}")
        from pipeline.tasks import check_data

        check_data(name, task, root)
    from pipeline.calibration import texts

    texts(c, root)
    _check_group_sizes(p, root)
    d = p.decision
    if d.bootstrap.resamples < 100:
        raise ConfigError(f"decision.bootstrap.resamples: at least 100, got {d.bootstrap.resamples}")
    if not 0.5 < d.bootstrap.confidence < 1:
        raise ConfigError(f"decision.bootstrap.confidence: must be in (0.5, 1), got {d.bootstrap.confidence}")
    if d.length_buckets != sorted(set(d.length_buckets)) or not d.length_buckets:
        raise ConfigError(f"decision.length_buckets: must be strictly increasing, got {d.length_buckets}")
    mem = p.memory
    if not 0 < mem.gpu_memory_utilization <= 1:
        raise ConfigError(f"memory.gpu_memory_utilization: must be in (0, 1], got {mem.gpu_memory_utilization}")
    for gname, g in mem.target_gpus.items():
        if g.memory_gib <= 0 or g.bandwidth_gbps <= 0:
            raise ConfigError(f"memory.target_gpus.{gname}: memory_gib and bandwidth_gbps must be positive")
    b = p.decision.baseline
    if b.tier not in p.tiers:
        raise ConfigError(f"decision.baseline.tier: {b.tier!r} is not a tier (tiers: {', '.join(p.tiers)})")
    if b.kv not in p.kv_modes:
        raise ConfigError(f"decision.baseline.kv: {b.kv!r} is not a kv mode (kv_modes: {', '.join(p.kv_modes)})")
    for metric, tol in p.decision.tolerances.items():
        key = f"decision.tolerances.{metric}"
        if (tol.abs is None) == (tol.rel is None):
            raise ConfigError(f"{key}: give exactly one of 'abs' or 'rel'")
        value = tol.abs if tol.abs is not None else tol.rel
        if value < 0:
            raise ConfigError(f"{key}: a tolerance is the allowed drop and must be >= 0, got {value}")


def _check_group_sizes(p: Params, root: Path) -> None:
    """Group sizes against each model's dimensions, where its config is already on disk
    (a local source, or a prepared one); other models are checked when quantize starts."""
    import json

    from pipeline.recipes import RecipeError, pick_group_size

    for name, m in p.models.items():
        kind, _, ref = m.source.partition(":")
        candidates = [root / "artifacts" / name / "source" / "config.json"]
        if kind == "local":
            candidates.insert(0, (Path(ref) if Path(ref).is_absolute() else root / ref) / "config.json")
        cfg_file = next((c for c in candidates if c.is_file()), None)
        if cfg_file is None:
            continue
        hf = json.loads(cfg_file.read_text())
        for tname, t in p.tiers.items():
            try:
                pick_group_size(t, hf, f"tiers.{tname}")
            except RecipeError as e:
                raise ConfigError(f"{e} (model {name})") from None


def hardware_kinds() -> list[str]:
    from pipeline.hardware import table

    return list(table()[1])


def _check_source(key: str, source: str, root: Path) -> None:
    kind, _, ref = source.partition(":")
    if kind == "embedded":
        from pipeline.sources import EMBEDDED
        if ref not in EMBEDDED:
            raise ConfigError(f"{key}: unknown embedded model {ref!r}; known: {', '.join(EMBEDDED)}")
    elif kind == "local":
        path = Path(ref) if Path(ref).is_absolute() else root / ref
        if not path.is_dir():
            raise ConfigError(f"{key}: local model folder not found: {ref}")
        if not (path / "config.json").is_file():
            raise ConfigError(f"{key}: {ref} has no config.json (expected a Hugging Face model folder)")
    elif kind == "hub":
        if not re.match(r"^[\w.-]+/[\w.-]+$", ref):
            raise ConfigError(f"{key}: {ref!r} is not a hub id like 'org/name'")
    else:
        raise ConfigError(f"{key}: {source!r} must start with 'embedded:', 'local:' or 'hub:'")


def parse(raw: Any, root: Path = Path(".")) -> Params:
    params = _build_dataclass(Params, raw, "")
    validate(params, root)
    return params


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
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse(raw, path.parent)


def load_or_exit(path: str | Path = PARAMS_FILE) -> Params:
    try:
        return load(path)
    except ConfigError as e:
        print(f"qtier: params error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> None:
    p = load_or_exit(sys.argv[1] if len(sys.argv) > 1 else PARAMS_FILE)
    for v in p.variants():
        print("-".join(v))


if __name__ == "__main__":
    main()
