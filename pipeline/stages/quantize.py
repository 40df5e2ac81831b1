"""Stage quantize@<model>-<tier>: one tier's checkpoint from the prepared model.

    python -m pipeline.stages.quantize <model> <tier>

Writes artifacts/<model>/tiers/<tier>/ (a compressed-tensors checkpoint vLLM loads, or the cast
baseline) and results/quantize/<model>-<tier>.json: what later stages need (status, the path to
serve, load-time quantization, weight bytes, KV geometry) and what was done. Its wall time goes to
results/timings/, which no stage reads, so re-making an identical checkpoint re-runs nothing after it.
A failure is recorded as status "failed" with the reason, so the other tiers and the decision go on.
"""
from __future__ import annotations

import sys
import time
import traceback

from pipeline import errors, io, paths
from pipeline.quant.oneshot import NotThisModel, handoff, quantize, set_threads
from pipeline.stages import runner


@runner.stage_main("quantize", ("model", "tier"))
def main(st: runner.Stage) -> None:
    (model_name, tier_name), params = st.args, st.params
    out = paths.tier_dir(model_name, tier_name)
    threads = set_threads()
    t0 = time.perf_counter()
    try:
        info = quantize(params, model_name, tier_name, out)
        info["status"] = "ok"
    except io.DataError as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except NotThisModel as e:
        info = {"method": params.tiers[tier_name].method, "status": "unsupported", "reason": str(e)}
        with io.AtomicDir(out) as tmp:
            (tmp / paths.FAILED_MARKER).write_text(info["reason"] + "\n")
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
    st.done(info["status"], info.get("reason"))


if __name__ == "__main__":
    main()
