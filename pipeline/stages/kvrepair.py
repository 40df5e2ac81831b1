"""Stage kvrepair@<model>-<tier>: for each repaired KV mode (`kv_modes.<kv>.repair`), the tier served on
the reference engine with the mode's format, each layer's sensitivity measured, and the fewest
top-ranked layers kept in the model's dtype that bring the KL within `repair.max_kl`
(pipeline/quant/kv_repair.py decides, pipeline/evaluation/kv_sensitivity.py measures).

    python -m pipeline.stages.kvrepair <model> <tier>

Writes results/kvrepair/<model>-<tier>/<kv>.json per KV mode: the record under `repair`, which
pipeline/domain/result/kv_repaired.py reads back for evaluate, decide and the `vllm serve` line; for
any other mode {"repair": null}, the same bytes every time, so adding a repaired mode re-runs only its
own evaluate stages. Without a repaired mode the stage loads nothing. Its own stage (not kvscales'):
it loads torch with the reference engine, which kvscales, imported torch-free by the unit tier, does not.
"""
from __future__ import annotations

import time
from pathlib import Path

from pipeline import io, paths, runlog, schema
from pipeline.stages import runner
from pipeline.domain.hardware import kv_formats
from pipeline.domain.model import sources
from pipeline.domain.result import serving_record
from pipeline.domain.sets import calibration, long_texts
from pipeline.engines.base import Variant
from pipeline.engines.reference.backend import ReferenceBackend
from pipeline.evaluation import kv_sensitivity
from pipeline.quant import kv_repair


def texts(params: schema.Params, r: schema.KvRepair) -> list[str]:
    if r.data == "calibration":
        return calibration.selection_texts(params.calibration, r.texts)
    lc = params.eval.long_context
    return [text for _, text in long_texts.texts(lc.data, lc.field, r.texts)[:r.texts]]


def measure(params: schema.Params, model: str, tier: str, kv: str) -> dict:
    """The repair's record: status ok with the layers kept, each layer's KL, the search and the bytes per
    token; unsupported when the tier has no checkpoint."""
    mode = params.kv_modes[kv]
    r = mode.repair
    quantized = serving_record.read(paths.quantize_record(model, tier))
    if not quantized.ok or quantized.serve_path is None:
        return {"status": "unsupported", "reason": f"quantize: {quantized.reason or 'no checkpoint'}"}
    t0 = time.perf_counter()
    # skip_layers [0]: the reference engine then serves the format's own attention (for fp8_e4m3 too);
    # the probe installs the layers it keeps before every measurement
    probing = schema.KvMode(mode.cache_dtype, skip_layers=[0])
    served = schema.replaced(params, kv_modes={**params.kv_modes, kv: probing})
    variant = Variant.of(served, model, tier, kv, paths.tier_dir(model, tier), quantized)
    with ReferenceBackend(params.serving.reference, params.eval).session(variant) as s:
        seqs = [s.tokenizer(t).input_ids[:r.max_len] for t in texts(params, r)]
        probe = kv_sensitivity.Probe(s.model, mode.cache_dtype, seqs)
        runlog.progress(0, 2, f"kv repair {kv}: {probe.layers} layers, one at a time")
        per_layer = probe.per_layer()
        order = kv_repair.ranked(per_layer)
        runlog.progress(1, 2, f"kv repair {kv}: the fewest layers kept within KL {r.max_kl}")
        found = kv_repair.choose(order, probe.kl, r.max_kl, r.max_candidates)
        compute_dtype = s.info.get("compute_dtype")
    record = kv_repair.summary(order, per_layer, found)
    hf = io.read_json(Path(quantized.serve_path) / "config.json")
    dtype = sources.storage_dtype(params, model)
    record["bytes_per_token"] = {
        "auto": kv_formats.bytes_per_token(hf, "auto", dtype),
        mode.cache_dtype: kv_formats.bytes_per_token(hf, mode.cache_dtype, dtype),
        "repaired": kv_formats.bytes_per_token(hf, mode.cache_dtype, dtype, tuple(record["skip_layers"]))}
    record.update(status="ok", cache_dtype=mode.cache_dtype, data=r.data, texts=len(probe.seqs),
                  positions=probe.positions, max_len=r.max_len, compute_dtype=compute_dtype,
                  measured="reference engine, teacher-forced through the cache, every position reading it rounded "
                           "(as decode does); KL over "
                           "the full vocabulary to the same model with its own-dtype cache",
                  seconds=round(time.perf_counter() - t0, 1))
    return record


@runner.stage_main("kvrepair", ("model", "tier"))
def main(st: runner.Stage) -> None:
    (model, tier), params = st.args, st.params
    outcomes: dict[str, dict] = {}
    t0 = time.perf_counter()
    # the folder holds only the current KV modes: a removed mode leaves no stale record behind
    with io.AtomicDir(paths.kvrepair_records(model, tier)) as records:
        for kv, mode in params.kv_modes.items():
            record = None if mode.repair is None else measure(params, model, tier, kv)
            io.atomic_write_json(records / f"{kv}.json", {"repair": record})
            if record is not None:
                outcomes[kv] = record
                print(f"kvrepair@{model}-{tier} {kv}: {record['status']}, layers kept {record.get('skip_layers')}")
    io.atomic_write_json(paths.timing(f"kvrepair-{model}-{tier}"), {"seconds": round(time.perf_counter() - t0, 1)})
    st.done("unsupported" if any(r["status"] != "ok" for r in outcomes.values()) else "ok",
            "; ".join(f"{kv}: {r['status']}, {len(r.get('skip_layers') or [])} layers kept"
                      + (f" ({r['reason']})" if r.get("reason") else "") for kv, r in outcomes.items())
            or "no repaired KV mode")


if __name__ == "__main__":
    main()
