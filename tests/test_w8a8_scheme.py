"""Which W8A8 schemes the reference backend computes as vLLM does, and the clear refusal of the others
(pipeline/quant/w8a8_scheme.py). Unit: no torch."""
from pathlib import Path

import pytest
import yaml

from pipeline.quant.w8a8_scheme import W8A8Scheme, W8A8SchemeError, checkpoint_schemes, scheme_of

ROOT = Path(__file__).resolve().parents[1]


def args(type_="int", strategy="channel", dynamic=False, **kw):
    # as llm-compressor writes a group into config.json (compressed-tensors 0.19)
    d = {"actorder": None, "block_structure": None, "dynamic": dynamic, "group_size": None, "num_bits": 8,
         "observer": None, "observer_kwargs": {}, "scale_dtype": None, "strategy": strategy, "symmetric": True,
         "type": type_, "zp_dtype": None}
    return {**d, **kw}


def group(type_="int", weights=None, acts=None, fmt=None):
    return {"format": fmt or {"int": "int-quantized", "float": "float-quantized"}[type_],
            "input_activations": args(type_, "token", True) if acts is None else acts,
            "output_activations": None, "targets": ["Linear"],
            "weights": args(type_) if weights is None else weights}


def config(*groups, **top):
    return {"config_groups": {f"group_{i}": g for i, g in enumerate(groups)}, "format": "int-quantized",
            "quant_method": "compressed-tensors", "sparsity_config": {}, "transform_config": {}, **top}


def test_the_project_recipes_schemes_are_implemented():
    for recipe, kind in (("w8a8_int8.yaml", "int8"), ("fp8_dynamic.yaml", "fp8")):
        stages = yaml.safe_load((ROOT / "recipes" / recipe).read_text())
        mods = stages["quant_stage"]["quant_modifiers"]
        g = next(iter(mods.values()))["config_groups"]["group_0"]
        g["format"] = "int-quantized" if kind == "int8" else "float-quantized"
        assert scheme_of(g, recipe) == W8A8Scheme(kind, "channel", "token")


def test_checkpoint_schemes_reads_every_activation_quantized_group():
    weight_only = {"format": "pack-quantized", "targets": ["Linear"], "weights": args(num_bits=4),
                   "input_activations": None}
    found = checkpoint_schemes(config(group(), group("float", acts=args("float", "tensor", False)), weight_only))
    assert found == {"group_0": W8A8Scheme("int8", "channel", "token"),
                     "group_1": W8A8Scheme("fp8", "channel", "tensor")}
    assert checkpoint_schemes(config(weight_only)) == {}
    assert checkpoint_schemes({}) == {}
    per_tensor = group(weights=args(strategy="tensor"), acts=args("int", "tensor", False))
    assert checkpoint_schemes(config(per_tensor))["group_0"] == W8A8Scheme("int8", "tensor", "tensor")


def test_the_checkpoint_format_stands_in_for_a_group_without_one():
    g = group()
    del g["format"]
    assert scheme_of(g, "g", fmt="int-quantized") == W8A8Scheme("int8", "channel", "token")
    with pytest.raises(W8A8SchemeError, match="format None"):
        scheme_of(g, "g")


@pytest.mark.parametrize("g, says", [
    (group(acts=args("int", "token", True, symmetric=False)), "input_activations.symmetric = False"),
    (group(weights=args(symmetric=False)), "weights.symmetric = False"),
    (group(acts=args("int", "tensor", True)), "input_activations.dynamic = True"),
    (group(acts=args("int", "token", False)), "input_activations.dynamic = False"),
    (group(acts=args("int", "token", "local")), "input_activations.dynamic = 'local'"),
    (group(acts=args("int", "group", True, group_size=128)), "input_activations.strategy = 'group'"),
    (group(weights=args(strategy="group", group_size=128)), "weights.strategy = 'group'"),
    (group(weights=args(strategy="block", block_structure=[128, 128])), "weights.strategy = 'block'"),
    (group(weights=args(num_bits=4)), "weights.num_bits = 4"),
    (group(acts=args("int", "token", True, num_bits=16)), "input_activations.num_bits = 16"),
    (group(weights=args(scale_dtype="float8_e4m3fn")), "weights.scale_dtype"),
    (group(weights=args(actorder="bogus")), "weights.actorder"),
    (group(acts=args("float", "token", True)), "weights.type 'int' and input_activations.type 'float' differ"),
    (group(fmt="naive-quantized"), "format 'naive-quantized'"),
    ({**group(), "output_activations": args("int", "token", True)}, "output_activations is set"),
    ({**group(), "weights": None}, "input_activations without weights"),
])
def test_a_scheme_the_arithmetic_does_not_implement_is_refused_naming_the_field(g, says):
    with pytest.raises(W8A8SchemeError) as e:
        checkpoint_schemes(config(g))
    assert says in str(e.value) and "quantization_config.config_groups.group_0" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("key", ["transform_config", "sparsity_config"])
def test_transforms_and_sparsity_are_refused_for_w8a8(key):
    with pytest.raises(W8A8SchemeError, match=f"quantization_config.{key} is set"):
        checkpoint_schemes(config(group(), **{key: {"config_groups": {"x": {}}}}))


def test_gptq_s_activation_order_without_groups_is_the_weights_own_order():
    """The default int8 tier (SmoothQuant + GPTQ) records actorder 'static' per channel: nothing stored."""
    for order in ("static", "weight", "group", None):
        assert scheme_of(group(weights=args(actorder=order)), "here") is not None
