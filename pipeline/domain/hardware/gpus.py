"""Which GPUs can serve which tier, from pipeline/data/vllm_hardware.yaml (cites vLLM's docs). Pure."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pipeline.paths import HARDWARE_TABLE as DATA
from pipeline.schema.yaml_io import safe_load


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    min_compute_capability: float
    vllm_quantization_flag: str | None
    source: str


@dataclass(frozen=True)
class Table:
    vllm_docs_version: str           # the vLLM docs release the table cites
    kinds: dict[str, Kind]           # kind name -> kind


@lru_cache(maxsize=None)
def table(path: str = str(DATA)) -> Table:
    raw = safe_load(Path(path).read_text())
    return Table(raw["vllm_docs_version"], {name: Kind(name=name, **entry) for name, entry in raw["kinds"].items()})


def kind(name: str) -> Kind:
    kinds = table().kinds
    if name not in kinds:
        raise KeyError(f"unknown hardware kind {name!r}; known: {', '.join(kinds)}")
    return kinds[name]


def supports(kind_name: str, compute_capability: float) -> bool:
    return compute_capability + 1e-9 >= kind(kind_name).min_compute_capability


def describe(kind_name: str, gpus: dict[str, float]) -> str:
    """'A100-80G, H100-80G (SM >= 8.0)' - the listed GPUs that can serve this kind."""
    k = kind(kind_name)
    ok = [g for g, cc in gpus.items() if supports(kind_name, cc)]
    return f"{', '.join(ok) if ok else 'none of the target GPUs'} (SM >= {k.min_compute_capability:g})"
