"""A repaired KV mode as it is served: `kv_modes.<kv>` with `repair` set has its skip_layers chosen by
stage kvrepair@<model>-<tier> (results/kvrepair/<model>-<tier>/<kv>.json, key `repair`); this is the
one place that reads them back, for evaluate (what the engine serves), decide (the bytes per token)
and the `vllm serve` line (--kv-cache-dtype-skip-layers).

    mode = kv_repaired.mode(params, model, tier, kv)              # KvMode with the chosen skip_layers
    params = kv_repaired.params_for(params, model, tier, kv)      # the same, inside params.kv_modes
"""
from __future__ import annotations

from pipeline import io, paths
from pipeline.schema import KvMode, Params, replaced


def record(model: str, tier: str, kv: str) -> dict | None:
    """The repair's record stage kvrepair wrote (None: the file or its `repair` key is missing)."""
    path = paths.kvrepair_records(model, tier) / f"{kv}.json"
    return io.read_json(path).get("repair") if path.is_file() else None


def mode(params: Params, model: str, tier: str, kv: str) -> KvMode:
    """kv_modes.<kv>, a repaired one with the layers its repair kept (and `repair` cleared: what is
    served is then a plain skip_layers mode). A repaired mode whose tier has a checkpoint but no repair
    record is a DataError naming the file; one whose tier has none is returned as it is (its row says
    why there is no checkpoint)."""
    m = params.kv_modes[kv]
    if m.repair is None:
        return m
    found = record(model, tier, kv)
    if found is None or found.get("skip_layers") is None:
        quantized = paths.quantize_record(model, tier)
        if quantized.is_file() and io.read_json(quantized).get("status") != "ok":
            return m
        where = paths.kvrepair_records(model, tier) / f"{kv}.json"
        raise io.DataError(f"{where}: no chosen skip_layers for repaired kv mode {kv!r} "
                           f"({(found or {}).get('reason', 'stage kvrepair writes them')})")
    return replaced(m, skip_layers=[int(i) for i in found["skip_layers"]], repair=None)


def params_for(params: Params, model: str, tier: str, kv: str) -> Params:
    """params with kv_modes.<kv> as `mode` serves it."""
    resolved = mode(params, model, tier, kv)
    if resolved is params.kv_modes[kv]:
        return params
    return replaced(params, kv_modes={**params.kv_modes, kv: resolved})
