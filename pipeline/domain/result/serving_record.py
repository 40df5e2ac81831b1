"""A checkpoint's serving record, typed: what quantize (or kvscales, for calibrated k/v scales) hands to
evaluate and decide about a checkpoint, so neither opens its folder or the source (quant/oneshot.py
`handoff`). The file also describes how the checkpoint was made (recipe, calibration, SmoothQuant
mappings, ...), which no stage reads: those keys stay in the file for a reader and are not typed here.
Parsed by records.parse, which names the file and the key when one is of the wrong type. Pure
but for `read`.

    from pipeline.domain.result import serving_record
    rec = serving_record.read(paths.serving_record(model, tier, kv, calibrated))
    rec.ok, rec.serve_path, rec.geometry.head_dim
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

from pipeline import io
from pipeline.domain.result import records

OK = "ok"


@dataclass(frozen=True)
class Geometry:
    """The numbers the KV cache size depends on (domain/hardware/memory.py kv_geometry)."""
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_size: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class RepairProxy:
    """The proxy a repaired tier was searched on: texts, positions, the KL bound, and the KL of each
    number of promoted groups tried (as a string key)."""
    kind: str
    texts: int
    positions: int
    bound: float
    tried: dict[str, float]


@dataclass(frozen=True)
class Repair:
    """A repaired tier's search (quant/sensitivity.py plan): the layer groups promoted to more bits."""
    groups: int
    promoted: list[str]
    promote_bits: int
    effective_bits: float
    met_bound: bool
    stopped: str
    proxy: RepairProxy
    seconds: float
    promoted_modules: list[str]
    sensitivity: dict[str, float]


@dataclass(frozen=True)
class ServingRecord:
    """status ok: the checkpoint, where vLLM is pointed (serve_name for a published one, else
    serve_path), what it weighs (None: bitsandbytes packs at load, an endpoint does not say); else why not."""
    status: str
    reason: str | None = None
    serve_path: str | None = None
    serve_name: str | None = None
    # bitsandbytes: its BitsAndBytesConfig kwargs (recipes.bnb_config), quantized at load time
    load_quantization: dict[str, bool | str | float | list[str]] | None = None
    weight_bytes: int | None = None
    storage_dtype: str | None = None              # models.<name>.dtype `auto` resolved from config.json
    geometry: Geometry | None = None
    label: str | None = None                      # a repaired tier's: what was promoted
    repair: Repair | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def served_as(self) -> str | None:
        """What `vllm serve` is pointed at: a published checkpoint's name, else its path."""
        return self.serve_name or self.serve_path


TYPED = {f.name for f in fields(ServingRecord)}


def parse(data: dict, where: str) -> ServingRecord:
    """The hand-off part of a serving record; an io.DataError naming `where` and the key when it is
    missing or of the wrong type."""
    try:
        return records.parse(ServingRecord, {k: v for k, v in data.items() if k in TYPED}, where)
    except records.RecordError as e:
        raise io.DataError(f"{e}; re-run the stage that writes it (dvc repro)") from None


def read(path: Path) -> ServingRecord:
    return parse(io.read_json(path), str(path))
