"""Stage quantize@<model>-<tier>: one tier's checkpoint from the prepared model.

    python -m pipeline.stages.quantize <model> <tier>

Writes artifacts/<model>/tiers/<tier>/ (a compressed-tensors checkpoint vLLM loads, or the cast
baseline) and results/quantize/<model>-<tier>.json: what later stages need (status, the path to
serve, load-time quantization, weight bytes, KV geometry) and what was done. Its wall time goes to
results/timings/, which no stage reads, so re-making an identical checkpoint re-runs nothing after it.
A failure is recorded as status "failed" with the reason, so the other tiers and the decision go on.
"""
from __future__ import annotations

import os
import sys
import time
import traceback

from pipeline import errors, io, paths, schema
from pipeline.quant.oneshot import handoff, quantize, set_threads


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a hub from this stage
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    model_name, tier_name = sys.argv[1], sys.argv[2]
    params = schema.load_or_exit()
    if model_name not in params.models or tier_name not in params.tiers:
        sys.exit(f"qtier: no variant {model_name}/{tier_name} in params.yaml")
    out = paths.tier_dir(model_name, tier_name)
    threads = set_threads()
    t0 = time.perf_counter()
    try:
        info = quantize(params, model_name, tier_name, out)
        info["status"] = "ok"
    except io.DataError as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as e:  # noqa: BLE001 - any failure becomes a recorded, visible row
        traceback.print_exc()
        info = {"method": params.tiers[tier_name].method, "status": "failed",
                "reason": errors.one_line(e)}
        out.mkdir(parents=True, exist_ok=True)
        (out / paths.FAILED_MARKER).write_text(info["reason"] + "\n")
    seconds = round(time.perf_counter() - t0, 1)
    info.update(model=model_name, tier=tier_name)
    if info["status"] == "ok":
        info.update(handoff(params, model_name, out, info))
    io.atomic_write_json(paths.quantize_record(model_name, tier_name), info)
    io.atomic_write_json(paths.timing(f"quantize-{model_name}-{tier_name}"), {"seconds": seconds, "threads": threads})
    print(f"quantize@{model_name}-{tier_name}: {info['status']} in {seconds}s")


if __name__ == "__main__":
    main()
