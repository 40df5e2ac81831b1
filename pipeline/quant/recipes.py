"""Turn a recipe YAML (a DVC dependency) plus a tier's options into the recipe llm-compressor runs.

The tier's params are the source of truth for weight bits, symmetry, group size (or per-channel
strategy) and the ignore list: render() writes them into every quantization modifier, and
check_consistent() (run by the check stage, pipeline/config.py) rejects a recipe that states a
different value for any of them, so a recipe file never says one thing and the checkpoint another.
A recipe may leave them out. Everything else (type, activations, modifier options) is the recipe's.

Pure functions: no model, no llm-compressor import.
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from pipeline.io import read_text
from pipeline.schema import Tier
from pipeline.schema.yaml_io import safe_load

QUANT_MODIFIERS = ("GPTQModifier", "QuantizationModifier")


class RecipeError(ValueError):
    pass


def linear_in_features(model_config: dict) -> dict[str, int]:
    """Input widths of the Linear layers of a decoder block, from an HF config dict."""
    hidden = model_config["hidden_size"]
    heads = model_config["num_attention_heads"]
    head_dim = model_config.get("head_dim") or hidden // heads
    return {
        "hidden_size (q/k/v/gate/up input)": hidden,
        "num_attention_heads*head_dim (o_proj input)": heads * head_dim,
        "intermediate_size (down_proj input)": model_config["intermediate_size"],
    }


def pick_group_size(tier: Tier, model_config: dict, key: str) -> int | None:
    """The tier's group size, checked against the model: 'auto' takes the largest candidate
    that divides every Linear input width; an explicit size that does not divide is an error."""
    if tier.group_size is None:
        return None
    widths = linear_in_features(model_config)
    if tier.group_size == "auto":
        for g in sorted(tier.group_size_candidates, reverse=True):
            if all(w % g == 0 for w in widths.values()):
                return g
        raise RecipeError(
            f"{key}.group_size: no candidate in {tier.group_size_candidates} divides the model's "
            f"Linear input widths {widths}"
        )
    bad = {name: w for name, w in widths.items() if w % tier.group_size}
    if bad:
        raise RecipeError(
            f"{key}.group_size: {tier.group_size} does not divide {bad}; use 'auto' or a divisor"
        )
    return tier.group_size


def quant_modifiers(recipe: dict, where: str = "recipe") -> list[dict]:
    mods = [mod for stage in recipe.values() if isinstance(stage, dict)
            for modifiers in stage.values() if isinstance(modifiers, dict)
            for name, mod in modifiers.items() if name in QUANT_MODIFIERS and isinstance(mod, dict)]
    if not mods:
        raise RecipeError(f"{where} has no {' or '.join(QUANT_MODIFIERS)}")
    return mods


def render(template: dict, tier: Tier, group_size: int | None) -> dict:
    """Apply the tier's bits / group size / symmetry / ignore list to every quantization
    modifier in the recipe template. Returns a new dict."""
    recipe = copy.deepcopy(template)
    for mod in quant_modifiers(recipe):
        mod["ignore"] = list(tier.ignore)
        for group in mod.get("config_groups", {}).values():
            w = group.setdefault("weights", {})
            if tier.weight_bits is not None:
                w["num_bits"] = tier.weight_bits
            w["symmetric"] = tier.symmetric
            w["strategy"] = "channel" if group_size is None else "group"
            w.pop("group_size", None)
            if group_size is not None:
                # right after strategy, whether or not the recipe states it: the rendered recipe,
                # recorded in results/quantize, keeps one key order
                group["weights"] = _insert_after(w, "strategy", {"group_size": group_size})
    return recipe


def _insert_after(d: dict, key: str, new: dict) -> dict:
    out = {}
    for k, v in d.items():
        out[k] = v
        if k == key:
            out.update(new)
    return out


def check_consistent(template: dict, tier: Tier, key: str, path: str) -> None:
    """RecipeError, one line naming the tier key and the recipe file, when the recipe states a
    weight setting that the tier's params (the source of truth) contradict."""
    def clash(field: str, mine, says: str) -> RecipeError:
        return RecipeError(f"{key}.{field}: {_show(mine)} but {path} says {says}")

    for mod in quant_modifiers(template, f"{key}.recipe: {path}"):
        if "ignore" in mod and sorted(mod["ignore"] or []) != sorted(tier.ignore):
            raise clash("ignore", list(tier.ignore), f"ignore {_show(mod['ignore'])}")
        for group in (mod.get("config_groups") or {}).values():
            w = group.get("weights") or {}
            if "num_bits" in w and tier.weight_bits is not None and w["num_bits"] != tier.weight_bits:
                raise clash("weight_bits", tier.weight_bits, f"num_bits {_show(w['num_bits'])}")
            if "symmetric" in w and w["symmetric"] != tier.symmetric:
                raise clash("symmetric", tier.symmetric, f"symmetric {_show(w['symmetric'])}")
            strategy = "channel" if tier.group_size is None else "group"
            if "strategy" in w and w["strategy"] != strategy:
                raise clash("group_size", tier.group_size, f"strategy {_show(w['strategy'])}")
            if "group_size" in w and (not isinstance(tier.group_size, int) or w["group_size"] != tier.group_size):
                says = f"group_size {_show(w['group_size'])}"
                if tier.group_size == "auto":
                    says += " (auto picks it per model: leave it out of the recipe)"
                raise clash("group_size", tier.group_size, says)


def _show(value) -> str:
    """A value as params.yaml spells it."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def check_tier_recipe(tier: Tier, key: str, root: Path) -> None:
    """The tier's recipe file parses and agrees with the tier (check stage). RecipeError naming key and file."""
    check_consistent(load_template(str(root / tier.recipe), shown=tier.recipe), tier, key, tier.recipe)


# llm-compressor's fp8 KV cache scheme, as vLLM reads it: one static symmetric scale per tensor for K
# and for V of each attention layer (checkpoint tensors self_attn.k_scale / v_scale)
FP8_KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


def with_kv_cache(recipe: dict, scheme: dict) -> dict:
    """The recipe with `kv_cache_scheme` on its last quantization modifier, so one oneshot run
    calibrates the k/v scales with the weights, as llm-compressor's fp8 KV examples do. Returns a new dict."""
    out = copy.deepcopy(recipe)
    quant_modifiers(out)[-1]["kv_cache_scheme"] = dict(scheme)
    return out


def kv_only(scheme: dict) -> dict:
    """A recipe that quantizes nothing but the KV cache: calibrated k/v scales for an unquantized model."""
    return {"kv_stage": {"quant_modifiers": {"QuantizationModifier": {"kv_cache_scheme": dict(scheme)}}}}


def load_template(path: str, shown: str | None = None) -> dict:
    """The recipe YAML at `path`; errors name it as `shown` (default: path), a byte that is not
    UTF-8 by line (io.DataError)."""
    shown = shown or path
    try:
        data = safe_load(read_text(path, shown=shown))
    except yaml.YAMLError as e:
        raise RecipeError(f"{shown}: not valid YAML ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise RecipeError(f"{shown}: a recipe must be a mapping of stages")
    return data


def to_yaml(recipe: dict) -> str:
    return yaml.safe_dump(recipe, sort_keys=False)


def bnb_config(tier: Tier) -> dict:
    """transformers BitsAndBytesConfig kwargs for a bitsandbytes tier."""
    if tier.method == "bnb-int8":
        base = {"load_in_8bit": True}
    elif tier.method == "bnb-nf4":
        base = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    else:
        raise RecipeError(f"{tier.method!r} is not a bitsandbytes method")
    if tier.ignore:
        base["llm_int8_skip_modules"] = list(tier.ignore)
    return {**base, **tier.bnb_options}
