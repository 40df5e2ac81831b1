"""The variant a benchmark serves: a tier + KV mode as the pipeline made it (quantize's record, or
kvscales' for a calibrated KV mode), after `dvc repro` made its checkpoint."""
from __future__ import annotations

from pipeline import io, paths, schema
from pipeline.engines import Variant


def served_variant(params: schema.Params, model: str, tier: str, kv: str) -> Variant:
    calibrated = params.kv_modes[kv].calibrated
    record = io.read_json(paths.serving_record(model, tier, kv, calibrated))
    return Variant.of(params, model, tier, kv, paths.serving_checkpoint(model, tier, kv, calibrated), record)
