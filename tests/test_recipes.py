import pytest

from pipeline.quant import recipes
from pipeline.schema import Tier

SMOL = {"hidden_size": 576, "num_attention_heads": 9, "head_dim": 64, "intermediate_size": 1536}
LLAMA8B = {"hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": 14336}


def tier(**kw):
    base = dict(method="gptq", recipe="recipes/gptq_w4a16.yaml", weight_bits=4, group_size="auto",
                hardware="int4-w4a16")
    base.update(kw)
    return Tier(**base)


def test_auto_group_size_picks_largest_divisor():
    assert recipes.pick_group_size(tier(), SMOL, "tiers.x") == 64      # 576 % 128 != 0
    assert recipes.pick_group_size(tier(), LLAMA8B, "tiers.x") == 128


def test_explicit_group_size_that_does_not_divide_names_key_and_width():
    with pytest.raises(recipes.RecipeError, match=r"tiers\.int4\.group_size: 128 does not divide .*576"):
        recipes.pick_group_size(tier(group_size=128), SMOL, "tiers.int4")


def test_no_candidate_divides():
    odd = dict(SMOL, hidden_size=577)
    with pytest.raises(recipes.RecipeError, match="no candidate"):
        recipes.pick_group_size(tier(group_size_candidates=[128, 64]), odd, "tiers.x")


def test_channelwise_when_group_size_null():
    assert recipes.pick_group_size(tier(group_size=None), SMOL, "k") is None


@pytest.mark.parametrize("path", ["recipes/gptq_w4a16.yaml", "recipes/awq_w4a16.yaml",
                                  "recipes/w8a8_int8.yaml", "recipes/rtn_w8a16.yaml"])
def test_render_applies_tier_options(in_repo, path):
    t = tier(recipe=path, symmetric=False, ignore=["lm_head", "re:.*gate"], group_size=64)
    out = recipes.render(recipes.load_template(path), t, 64)
    mods = [m for stage in out.values() for group in stage.values() for name, m in group.items()
            if name in recipes.QUANT_MODIFIERS]
    assert mods
    for m in mods:
        assert m["ignore"] == ["lm_head", "re:.*gate"]
        w = m["config_groups"]["group_0"]["weights"]
        assert (w["num_bits"], w["symmetric"], w["strategy"], w["group_size"]) == (4, False, "group", 64)


def test_render_channel_strategy_and_template_untouched(in_repo):
    template = recipes.load_template("recipes/w8a8_int8.yaml")
    out = recipes.render(template, tier(weight_bits=8, group_size=None), None)
    w = out["quant_stage"]["quant_modifiers"]["GPTQModifier"]["config_groups"]["group_0"]["weights"]
    assert w["strategy"] == "channel" and "group_size" not in w and w["num_bits"] == 8
    assert template["smooth_stage"] == out["smooth_stage"]
    act = out["quant_stage"]["quant_modifiers"]["GPTQModifier"]["config_groups"]["group_0"]["input_activations"]
    assert act["dynamic"] is True and act["strategy"] == "token"


def test_recipe_without_quant_modifier_is_an_error():
    with pytest.raises(recipes.RecipeError):
        recipes.render({"s": {"m": {"SmoothQuantModifier": {}}}}, tier(), 64)


def test_kv_cache_scheme_goes_on_the_last_quantization_modifier(in_repo):
    template = recipes.load_template("recipes/awq_w4a16.yaml")
    out = recipes.with_kv_cache(template, recipes.FP8_KV_SCHEME)
    mods = out["quant_stage"]["quant_modifiers"]
    assert mods["QuantizationModifier"]["kv_cache_scheme"] == recipes.FP8_KV_SCHEME
    assert "kv_cache_scheme" not in mods["AWQModifier"]
    assert "kv_cache_scheme" not in template["quant_stage"]["quant_modifiers"]["QuantizationModifier"]
    smooth = recipes.with_kv_cache(recipes.load_template("recipes/w8a8_int8.yaml"), recipes.FP8_KV_SCHEME)
    assert "kv_cache_scheme" in smooth["quant_stage"]["quant_modifiers"]["GPTQModifier"]
    assert "kv_cache_scheme" not in smooth["smooth_stage"]["smooth_modifiers"]["SmoothQuantModifier"]
    with pytest.raises(recipes.RecipeError):
        recipes.with_kv_cache({"s": {"m": {"SmoothQuantModifier": {}}}}, recipes.FP8_KV_SCHEME)


def test_kv_only_recipe_quantizes_nothing_else():
    r = recipes.kv_only(recipes.FP8_KV_SCHEME)
    (mod,) = [m for stage in r.values() for mods in stage.values() for m in mods.values()]
    assert mod == {"kv_cache_scheme": recipes.FP8_KV_SCHEME}
