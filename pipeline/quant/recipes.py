"""Turn a recipe YAML (a DVC dependency) plus a tier's options into the recipe llm-compressor runs.

Pure functions: no model, no llm-compressor import.
"""
from __future__ import annotations

import copy

import yaml

from pipeline.schema import Tier

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


def render(template: dict, tier: Tier, group_size: int | None) -> dict:
    """Apply the tier's bits / group size / symmetry / ignore list to every quantization
    modifier in the recipe template. Returns a new dict."""
    recipe = copy.deepcopy(template)
    found = 0
    for stage in recipe.values():
        for modifiers in stage.values():
            for name, mod in modifiers.items():
                if name not in QUANT_MODIFIERS:
                    continue
                found += 1
                mod["ignore"] = list(tier.ignore)
                for group in mod.get("config_groups", {}).values():
                    w = group.setdefault("weights", {})
                    if tier.weight_bits is not None:
                        w["num_bits"] = tier.weight_bits
                    w["symmetric"] = tier.symmetric
                    if group_size is None:
                        w["strategy"] = "channel"
                        w.pop("group_size", None)
                    else:
                        w["strategy"] = "group"
                        w["group_size"] = group_size
    if not found:
        raise RecipeError(f"recipe has no {' or '.join(QUANT_MODIFIERS)}")
    return recipe


# llm-compressor's fp8 KV cache scheme, as vLLM reads it: one static symmetric scale per tensor for K
# and for V of each attention layer (checkpoint tensors self_attn.k_scale / v_scale)
FP8_KV_SCHEME = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}


def with_kv_cache(recipe: dict, scheme: dict) -> dict:
    """The recipe with `kv_cache_scheme` on its last quantization modifier, so one oneshot run
    calibrates the k/v scales with the weights, as llm-compressor's fp8 KV examples do. Returns a new dict."""
    out = copy.deepcopy(recipe)
    mods = [mod for stage in out.values() for modifiers in stage.values()
            for name, mod in modifiers.items() if name in QUANT_MODIFIERS]
    if not mods:
        raise RecipeError(f"recipe has no {' or '.join(QUANT_MODIFIERS)}")
    mods[-1]["kv_cache_scheme"] = dict(scheme)
    return out


def kv_only(scheme: dict) -> dict:
    """A recipe that quantizes nothing but the KV cache: calibrated k/v scales for an unquantized model."""
    return {"kv_stage": {"quant_modifiers": {"QuantizationModifier": {"kv_cache_scheme": dict(scheme)}}}}


def load_template(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe must be a mapping of stages")
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
