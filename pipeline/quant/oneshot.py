"""Make one tier's checkpoint with llm-compressor (or record a load-time bitsandbytes tier).

Used by the stages quantize@<model>-<tier> (the tier) and kvscales@<model>-<tier> (the same tier with
llm-compressor's `kv_cache_scheme` calibrated in the same run: a checkpoint carrying k/v scales).
torch, transformers and llm-compressor are imported inside the functions: seconds of imports.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline import io, paths, runlog, schema
from pipeline.domain.hardware import compute, machine, memory
from pipeline.domain.sets import calibration
from pipeline.quant import gguf_tier, published, recipes, repair, sensitivity, smoothing
from pipeline.quant.compat import patch_llmcompressor_pin_memory


class NotThisModel(Exception):
    """A published tier crossed with a model it is not a checkpoint of: recorded as unsupported."""


def set_threads() -> int:
    """All cores for torch (llm-compressor's calibration passes); returns how many."""
    import torch

    n = os.cpu_count() or 1
    torch.set_num_threads(n)
    return n


def resolved_model(model_cfg: schema.Model, hf_config: dict) -> schema.Model:
    """The model entry with a concrete dtype (`auto` resolved from the source's config.json)."""
    return schema.replaced(model_cfg, dtype=compute.model_dtype(model_cfg.dtype, hf_config))


def load_placement(model_cfg: schema.Model) -> compute.Placement:
    """How llm-compressor's input model is loaded on this machine (pipeline/domain/hardware/compute.py)."""
    return compute.quantize_placement(machine.accelerator_available(), model_cfg.dtype)


def quantize(params: schema.Params, model_name: str, tier_name: str, out: Path, kv_scheme: dict | None = None) -> dict:
    """Run the tier's method into `out`; with `kv_scheme`, calibrate the KV cache scales in the same
    run (the baseline: a KV-only recipe). Returns the facts recorded for the decision table."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tier = params.tiers[tier_name]
    if tier.method == "published":
        if tier.model not in (None, model_name):
            raise NotThisModel(f"tiers.{tier_name} is a published checkpoint of model {tier.model}")
        if kv_scheme is not None:
            raise ValueError("a published checkpoint is served as it is: no k/v scales are calibrated for it")
        return published_tier(tier, f"tiers.{tier_name}", paths.source_dir(model_name), out)
    if tier.method == "endpoint":
        if tier.model not in (None, model_name):
            raise NotThisModel(f"tiers.{tier_name} is an endpoint serving model {tier.model}")
        if kv_scheme is not None:
            raise ValueError("an endpoint is served as it is: no k/v scales are calibrated for it")
        return endpoint_tier(tier, out)
    if tier.method == "gguf":
        if kv_scheme is not None:
            raise ValueError("a GGUF tier is served by llama.cpp: no k/v scales are calibrated for it")
        try:
            return gguf_tier.quantize(tier, params.models[model_name].source, paths.source_dir(model_name), out)
        except gguf_tier.GgufUnavailable as e:
            raise NotThisModel(f"tiers.{tier_name}: {e}") from None
    src = paths.source_dir(model_name)
    hf_config = json.loads((src / "config.json").read_text())
    model_cfg = resolved_model(params.models[model_name], hf_config)
    info: dict = {"method": tier.method, "label": tier.label}
    tokenizer = AutoTokenizer.from_pretrained(src)

    if tier.method in schema.BNB_METHODS:
        if kv_scheme is not None:
            raise ValueError("bitsandbytes quantizes at load time: no llm-compressor checkpoint can carry "
                             "calibrated k/v scales for it")
        # bitsandbytes quantizes at load time: the tier is a record of its config, nothing more.
        bnb = recipes.bnb_config(tier)
        with io.AtomicDir(out) as tmp:
            io.atomic_write_json(tmp / paths.LOAD_SPEC, {"load_from": str(src), "bitsandbytes": bnb})
        info.update(scheme=tier.method, bitsandbytes=bnb)
        return info

    if tier.method == "baseline" and kv_scheme is None:
        model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, model_cfg.dtype))
        with io.AtomicDir(out) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        info["scheme"] = model_cfg.dtype
        return info

    if tier.method == "baseline":
        recipe = recipes.kv_only(kv_scheme)
        info.update(scheme=model_cfg.dtype, recipe=recipe)
    else:
        group_size = recipes.pick_group_size(tier, hf_config, f"tiers.{tier_name}")
        # the check stage's copy, byte for byte, which this stage depends on (its params name the original)
        template = recipes.load_template(str(paths.tier_recipe(tier_name)), shown=tier.recipe)
        recipe = recipes.render(template, tier, group_size)
        if kv_scheme is not None:
            recipe = recipes.with_kv_cache(recipe, kv_scheme)
        info.update(recipe_file=tier.recipe, group_size=group_size, weight_bits=tier.weight_bits,
                    symmetric=tier.symmetric, ignore=list(tier.ignore), recipe=recipe)
    if kv_scheme is not None:
        info["kv_cache_scheme"] = kv_scheme

    from datasets import Dataset
    from llmcompressor import oneshot

    info["pin_memory_patched"] = patch_llmcompressor_pin_memory()
    cal = params.calibration
    # GPU: the model's dtype, left on the CPU for oneshot's sequential pipeline to onload layer by
    # layer (llm-compressor's examples); no GPU: float32 (pipeline/domain/hardware/compute.py)
    place = load_placement(model_cfg)
    info["compute"] = {"device": place.device, "dtype": place.dtype}
    model = AutoModelForCausalLM.from_pretrained(src, dtype=getattr(torch, place.dtype))
    # SmoothQuant's and AWQ's mappings held against a traced forward before any rounding (smoothing.py)
    probe = tokenizer(calibration.texts(cal)[0], return_tensors="pt").input_ids[:, :64]
    done = smoothing.checked(model, recipe, probe, f"tiers.{tier_name}")
    recipe = done.recipe
    if done.mappings:
        info.update(recipe=recipe, smoothquant_mappings=done.mappings)
    if done.kl:
        info["kl_before_rounding"] = done.kl
    if tier.repair is not None:
        recipe = info["recipe"] = repaired(model, tokenizer, params, tier, group_size, recipe, info)
    data: dict = {}
    if tier.method in schema.CALIBRATED_METHODS or kv_scheme is not None:
        data = {"dataset": Dataset.from_dict({"text": calibration.texts(cal)}), "text_column": "text",
                "num_calibration_samples": cal.num_samples, "max_seq_length": cal.max_seq_len,
                "shuffle_calibration_samples": False}  # default True makes every run differ
        info["calibration"] = {"path": cal.path, "num_samples": cal.num_samples, "max_seq_len": cal.max_seq_len}
    runlog.progress(1, 3, "llm-compressor oneshot")     # steps: load, oneshot, save
    oneshot(model=model, tokenizer=tokenizer, recipe=recipes.to_yaml(recipe), log_dir=None, **data)
    runlog.progress(2, 3, "saving the checkpoint")
    model = model.to(getattr(torch, model_cfg.dtype))
    with io.AtomicDir(out) as tmp:
        model.save_pretrained(tmp, save_compressed=True)
        tokenizer.save_pretrained(tmp)
    return info


def repaired(model, tokenizer, params: schema.Params, tier: schema.Tier, group_size, recipe: dict, info: dict) -> dict:
    """The recipe with the layer groups the repair search promotes (pipeline/quant/sensitivity.py);
    what it found goes into `info` (results/quantize) and the tier's label."""
    runlog.progress(0, 3, "repair: layer sensitivity and search")
    texts = calibration.selection_texts(params.calibration, tier.repair.texts)
    found = sensitivity.plan(model, tokenizer, texts, tier, group_size)
    info["repair"] = found
    info["label"] = (f"{tier.label}; {len(found['promoted'])} of {found['groups']} layer groups at "
                     f"{found['promote_bits']} bits ({found['effective_bits']:.2f} effective bits)")
    return repair.promoted_recipe(recipe, found["promoted_modules"], tier.repair.promote_bits)


def published_tier(tier: schema.Tier, key: str, source: Path, out: Path) -> dict:
    """A published checkpoint checked against the source (io.DataError on a mismatch: a wrong
    checkpoint is bad input, stopped before any evaluation) and recorded; `out` gets its reference."""
    folder = published.resolve(tier.checkpoint, tier.revision)
    try:
        found = published.validate(key, folder, source)
    except published.Mismatch as e:
        raise io.DataError(str(e)) from None
    kind, _, name = tier.checkpoint.partition(":")
    ref = {"checkpoint": tier.checkpoint, "revision": tier.revision, "path": str(folder),
           # what a `vllm serve` line names: the hub repo, or the folder as params.yaml gives it
           "serve_name": name, "scheme": found["scheme"]}
    with io.AtomicDir(out) as tmp:
        io.atomic_write_json(tmp / paths.PUBLISHED_REF, ref)
    return {"method": tier.method, "label": tier.label, "scheme": found["scheme"]["summary"], "published": ref}


def endpoint_tier(tier: schema.Tier, out: Path) -> dict:
    """An endpoint's record: where it is and what it answers to (never its key). Nothing is downloaded:
    evaluate's preflight checks the server against the source's tokenizer before any task."""
    ref = {"base_url": tier.base_url.rstrip("/"), "served_model": tier.served_model, "api_key_env": tier.api_key_env}
    with io.AtomicDir(out) as tmp:
        io.atomic_write_json(tmp / paths.ENDPOINT_REF, ref)
    return {"method": tier.method, "label": tier.label,
            "scheme": f"as served by {ref['served_model']} at {ref['base_url']}", "endpoint": ref}


def handoff(params: schema.Params, model_name: str, out: Path, info: dict) -> dict:
    """What evaluate and decide read about a checkpoint, so neither opens its folder or the source.
    A published checkpoint is served from where it is, described by its own config.json."""
    pub, endpoint, gguf = info.get("published"), info.get("endpoint"), info.get("gguf")
    if pub is not None:
        out = Path(pub["path"])
    hf = json.loads(((out if pub else paths.source_dir(model_name)) / "config.json").read_text())
    bnb = info.get("bitsandbytes")
    return {
        # an endpoint's tokenizer is the source's (evaluate's preflight checks the server counts alike)
        "serve_path": str(paths.source_dir(model_name) if bnb or endpoint or gguf else out),
        **({"serve_name": pub["serve_name"]} if pub else {}),
        "load_quantization": bnb,
        # bitsandbytes packs at load time: evaluate measures those bytes after loading; an endpoint's
        # weights are on its server, which does not say; a GGUF file's are its tensor table's (gguf_bill)
        "weight_bytes": (gguf["bill"]["weight_bytes"] if gguf
                         else None if bnb or endpoint else memory.weight_bytes(out)),
        "storage_dtype": compute.model_dtype(params.models[model_name].dtype, hf),   # `auto` resolved
        "geometry": memory.kv_geometry(hf),
    }
