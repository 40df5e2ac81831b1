"""Stage kvscales@<model>-<tier>: the tier re-made with calibrated fp8 KV cache scales, for each KV mode
that asks for them (`kv_modes.<kv>.scale: calibrated`).

    python -m pipeline.stages.kvscales <model> <tier>

vLLM reads per-layer k/v scales from a checkpoint (llm-compressor's `kv_cache_scheme`: tensors
`self_attn.k_scale` / `v_scale`) and uses 1.0 when there are none. Calibrating them is part of
quantization: the tier's own recipe runs again with `kv_cache_scheme` added to its last quantization
modifier (the baseline: a KV-only recipe), on the same calibration set, as llm-compressor's fp8-KV
examples do. The weights may come out slightly different from the tier's own (llm-compressor
calibrates with the KV cache quantized); the record says how many tensors are identical.

Writes, per KV mode, artifacts/<model>/kvscales/<tier>/<kv> and results/kvscales/<model>-<tier>/<kv>.json:
a checkpoint and its record (as quantize's, plus the scales) for a calibrated mode; for any other a
marker and {"calibrated": false}, the same bytes every time, so adding a calibrated mode re-runs only
its own evaluate stages. Without a calibrated mode the stage loads nothing. A tier that cannot carry
scales (bitsandbytes: quantized at load time) or whose quantization failed gets a record saying why.
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from pipeline import errors, io, paths, runlog, schema
from pipeline.quant import recipes
from pipeline.quant.oneshot import handoff, quantize, set_threads
from pipeline.quant.scales import checkpoint_scales, scales_summary
from pipeline.stages import runner

NOT_CALIBRATED = "uncalibrated: this KV mode serves the tier's own checkpoint\n"


def identical_tensors(a: Path, b: Path) -> dict:
    """How many weight tensors two checkpoints share bit for bit (k/v scales aside), one tensor in
    memory at a time (an 8B checkpoint is 16 GB)."""
    import torch
    from safetensors import safe_open

    def index(d: Path) -> dict[str, Path]:
        out: dict[str, Path] = {}
        for f in sorted(d.glob("*.safetensors")):
            with safe_open(str(f), "pt") as st:
                out.update({k: f for k in st.keys() if not k.endswith((".k_scale", ".v_scale"))})  # noqa: SIM118
        return out

    def tensor(f: Path, name: str):
        with safe_open(str(f), "pt") as st:
            return st.get_tensor(name)

    ia, ib = index(a), index(b)
    same = 0
    for name, f in ia.items():
        if name in ib:
            x, y = tensor(f, name), tensor(ib[name], name)
            same += int(x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y))
    return {"identical": same, "tensors": len(ia)}


def calibrate(params: schema.Params, model: str, tier: str, out: Path) -> dict:
    """One calibrated checkpoint into `out`; its record (status ok | unsupported | failed, with why)."""
    quantized = io.read_json(paths.quantize_record(model, tier))
    if quantized.get("status") != "ok":
        return {"status": "unsupported" if quantized.get("status") == "unsupported" else "failed",
                "reason": f"quantize: {quantized.get('reason', 'no checkpoint')}"}
    if params.tiers[tier].method in schema.BNB_METHODS:
        return {"status": "unsupported", "reason": "bitsandbytes quantizes at load time: no llm-compressor "
                                                   "checkpoint carries calibrated k/v scales for it"}
    if params.tiers[tier].method in ("published", "endpoint"):
        return {"status": "unsupported", "reason": f"a {params.tiers[tier].method} tier is served as it is: k/v "
                                                   "scales are calibrated only for tiers qtier quantizes"}
    set_threads()          # only here: a tier that cannot be calibrated is recorded without importing torch
    t0 = time.perf_counter()
    try:
        info = quantize(params, model, tier, out, kv_scheme=recipes.FP8_KV_SCHEME)
        info.update(status="ok", seconds=round(time.perf_counter() - t0, 1), **handoff(params, model, out, info))
        info["scales"] = scales_summary(checkpoint_scales(out))
    except io.DataError:
        raise
    except Exception as e:  # noqa: BLE001 - a tier that cannot be calibrated is a visible row, not a stop
        traceback.print_exc()
        return {"status": "failed", "reason": errors.one_line(e)}
    info["weights_vs_tier"] = identical_tensors(out, paths.tier_dir(model, tier))
    return info


@runner.stage_main("kvscales", ("model", "tier"))
def main(st: runner.Stage) -> None:
    (model, tier), params = st.args, st.params
    calibrated = [kv for kv, mode in params.kv_modes.items() if mode.calibrated]
    outcomes: dict[str, dict] = {}
    t0 = time.perf_counter()
    # the folders hold only the current KV modes: a removed mode leaves no stale checkpoint behind
    try:
        with io.AtomicDir(paths.kvscales_dir(model, tier)) as ckpts, \
                io.AtomicDir(paths.kvscales_records(model, tier)) as records:
            for kv, mode in params.kv_modes.items():
                if not mode.calibrated:
                    (ckpts / kv).write_text(NOT_CALIBRATED)
                    io.atomic_write_json(records / f"{kv}.json", {"calibrated": False})
                    continue
                runlog.progress(len(outcomes), len(calibrated), f"calibrating KV mode {kv}")
                record = calibrate(params, model, tier, ckpts / kv)
                record.update(model=model, tier=tier, kv=kv, calibrated=True)
                if record["status"] == "ok":
                    record["serve_path"] = str(paths.serving_checkpoint(model, tier, kv, calibrated=True))
                else:
                    (ckpts / kv).write_text(f"{record['status']}: {record['reason']}\n")
                io.atomic_write_json(records / f"{kv}.json", record)
                outcomes[kv] = record
                print(f"kvscales@{model}-{tier} {kv}: {record['status']}"
                      + (f" ({record['reason']})" if record.get("reason") else ""))
    except io.DataError as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    io.atomic_write_json(paths.timing(f"kvscales-{model}-{tier}"), {"seconds": round(time.perf_counter() - t0, 1)})
    found = {r["status"] for r in outcomes.values()}
    st.done(next((s for s in ("failed", "unsupported") if s in found), "ok"),
            "; ".join(f"{kv}: {r['status']}" + (f" ({r['reason']})" if r.get("reason") else "")
                      for kv, r in outcomes.items()) or "no calibrated KV mode")


if __name__ == "__main__":
    main()
