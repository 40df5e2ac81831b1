"""Stage quantize@<model>-<tier>: one tier's checkpoint from the prepared model.

    python -m pipeline.stages.quantize <model> <tier>

Writes artifacts/<model>/tiers/<tier>/ (a compressed-tensors checkpoint vLLM loads, or the cast
baseline) and results/quantize/<model>-<tier>.json: what later stages need (status, the path to
serve, load-time quantization, weight bytes, KV geometry) and what was done. Its wall time goes to
results/timings/, which no stage reads, so re-making an identical checkpoint re-runs nothing after it.
A failure is recorded as status "failed" with the reason, so the other tiers and the decision go on.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from pipeline import errors, io, paths, schema
from pipeline.domain import calibration, compute, machine, memory
from pipeline.quant import recipes
from pipeline.quant.compat import patch_llmcompressor_pin_memory


def set_threads() -> int:
    import torch

    n = os.cpu_count() or 1
    torch.set_num_threads(n)
    return n


def load_placement(model_cfg: schema.Model) -> compute.Placement:
    """How llm-compressor's input model is loaded on this machine (pipeline/domain/compute.py)."""
    return compute.quantize_placement(machine.accelerator_available(), model_cfg.dtype)


def quantize(params: schema.Params, model_name: str, tier_name: str, out: Path) -> dict:
    """Run the tier's method; returns the facts recorded for the decision table."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tier = params.tiers[tier_name]
    model_cfg = params.models[model_name]
    src = paths.source_dir(model_name)
    hf_config = json.loads((src / "config.json").read_text())
    info: dict = {"method": tier.method, "label": tier.label}
    tokenizer = AutoTokenizer.from_pretrained(src)

    if tier.method in schema.BNB_METHODS:
        # bitsandbytes quantizes at load time: the tier is a record of its config, nothing more.
        bnb = recipes.bnb_config(tier)
        with io.AtomicDir(out) as tmp:
            io.atomic_write_json(tmp / paths.LOAD_SPEC, {"load_from": str(src), "bitsandbytes": bnb})
        info.update(scheme=tier.method, bitsandbytes=bnb)
        return info

    if tier.method == "baseline":
        model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, model_cfg.dtype))
        with io.AtomicDir(out) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        info["scheme"] = model_cfg.dtype
        return info

    group_size = recipes.pick_group_size(tier, hf_config, f"tiers.{tier_name}")
    recipe = recipes.render(recipes.load_template(tier.recipe), tier, group_size)
    info.update(recipe_file=tier.recipe, group_size=group_size, weight_bits=tier.weight_bits,
                symmetric=tier.symmetric, ignore=list(tier.ignore), recipe=recipe)

    from datasets import Dataset
    from llmcompressor import oneshot

    info["pin_memory_patched"] = patch_llmcompressor_pin_memory()
    cal = params.calibration
    # GPU: the model's dtype, left on the CPU for oneshot's sequential pipeline to onload layer by
    # layer (llm-compressor's examples); no GPU: float32 (pipeline/domain/compute.py)
    place = load_placement(model_cfg)
    info["compute"] = {"device": place.device, "dtype": place.dtype}
    model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, place.dtype))
    data: dict = {}
    if tier.method in schema.CALIBRATED_METHODS:
        data = dict(dataset=Dataset.from_dict({"text": calibration.texts(cal)}), text_column="text",
                    num_calibration_samples=cal.num_samples, max_seq_length=cal.max_seq_len,
                    shuffle_calibration_samples=False)  # default True makes every run differ
        info["calibration"] = {"path": cal.path, "num_samples": cal.num_samples, "max_seq_len": cal.max_seq_len}
    oneshot(model=model, tokenizer=tokenizer, recipe=recipes.to_yaml(recipe), log_dir=None, **data)
    model = model.to(getattr(torch, model_cfg.dtype))
    with io.AtomicDir(out) as tmp:
        model.save_pretrained(tmp, save_compressed=True)
        tokenizer.save_pretrained(tmp)
    return info


def handoff(params: schema.Params, model_name: str, tier_name: str, out: Path, info: dict) -> dict:
    """What evaluate and decide read about this tier, so neither opens the tier folder or the source."""
    hf = json.loads((paths.source_dir(model_name) / "config.json").read_text())
    bnb = info.get("bitsandbytes")
    return {
        "serve_path": str(paths.source_dir(model_name) if bnb else out),
        "load_quantization": bnb,
        # bitsandbytes packs at load time: evaluate measures those bytes after loading
        "weight_bytes": None if bnb else memory.weight_bytes(out),
        "storage_dtype": params.models[model_name].dtype,
        "geometry": memory.kv_geometry(hf),
    }


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
        (out / "FAILED.txt").write_text(info["reason"] + "\n")
    seconds = round(time.perf_counter() - t0, 1)
    info.update(model=model_name, tier=tier_name)
    if info["status"] == "ok":
        info.update(handoff(params, model_name, tier_name, out, info))
    io.atomic_write_json(paths.quantize_record(model_name, tier_name), info)
    io.atomic_write_json(paths.timing(f"quantize-{model_name}-{tier_name}"), {"seconds": seconds, "threads": threads})
    print(f"quantize@{model_name}-{tier_name}: {info['status']} in {seconds}s")


if __name__ == "__main__":
    main()
