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


def test_shipped_recipes_agree_with_the_shipped_tiers(root):
    from pipeline import schema

    p = schema.load(root / "params.yaml")      # the tiers as parsed; config.load's model checks read the GGUF
    checked = [name for name, t in p.tiers.items() if t.recipe]
    assert len(checked) == 4
    for name in checked:
        recipes.check_tier_recipe(p.tiers[name], f"tiers.{name}", root)


@pytest.mark.parametrize("stated, tier_kw, expected", [
    ({"num_bits": 4}, dict(weight_bits=8, group_size=None),
     "tiers.int8.weight_bits: 8 but r.yaml says num_bits 4"),
    ({"symmetric": False}, dict(weight_bits=8, group_size=None),
     "tiers.int8.symmetric: true but r.yaml says symmetric false"),
    ({"strategy": "group"}, dict(weight_bits=8, group_size=None),
     "tiers.int8.group_size: null but r.yaml says strategy group"),
    ({"strategy": "channel"}, dict(group_size=64), "tiers.int8.group_size: 64 but r.yaml says strategy channel"),
    ({"strategy": "group", "group_size": 128}, dict(group_size=64),
     "tiers.int8.group_size: 64 but r.yaml says group_size 128"),
    ({"group_size": 128}, dict(group_size="auto"),
     "tiers.int8.group_size: auto but r.yaml says group_size 128 (auto picks it per model"),
    ({"group_size": 128}, dict(group_size=None), "tiers.int8.group_size: null but r.yaml says group_size 128"),
])
def test_a_recipe_contradicting_its_tier_is_rejected_naming_key_and_file(stated, tier_kw, expected):
    template = {"s": {"m": {"GPTQModifier": {"config_groups": {"g": {"weights": stated}}}}}}
    with pytest.raises(recipes.RecipeError) as e:
        recipes.check_consistent(template, tier(**tier_kw), "tiers.int8", "r.yaml")
    assert str(e.value).startswith(expected), str(e.value)


def test_a_recipe_that_states_what_its_tier_says_or_leaves_it_out_passes():
    weights = {"num_bits": 4, "symmetric": True, "strategy": "group", "group_size": 64, "type": "int"}
    full = {"s": {"m": {"QuantizationModifier": {"ignore": ["lm_head"], "config_groups": {"g": {"weights": weights}}}}}}
    recipes.check_consistent(full, tier(group_size=64), "k", "r.yaml")
    bare = {"s": {"m": {"QuantizationModifier": {"config_groups": {"g": {"weights": {"type": "int"}}}}}}}
    recipes.check_consistent(bare, tier(), "k", "r.yaml")


def test_a_recipe_ignoring_other_modules_than_its_tier_is_rejected():
    template = {"s": {"m": {"GPTQModifier": {"ignore": ["lm_head", "re:.*gate"]}}}}
    with pytest.raises(recipes.RecipeError, match=r"^tiers\.x\.ignore: \[lm_head\] but r\.yaml says ignore "
                                                  r"\[lm_head, 're:\.\*gate'\]$"):
        recipes.check_consistent(template, tier(), "tiers.x", "r.yaml")


def test_render_writes_group_size_after_strategy_whether_or_not_the_recipe_states_it():
    stated = {"s": {"m": {"GPTQModifier": {"config_groups": {"g": {"weights": {
        "num_bits": 4, "strategy": "group", "group_size": 128, "actorder": None}}}}}}}
    bare = {"s": {"m": {"GPTQModifier": {"config_groups": {"g": {"weights": {
        "num_bits": 4, "strategy": "group", "actorder": None}}}}}}}
    for template in (stated, bare):
        w = recipes.render(template, tier(), 64)["s"]["m"]["GPTQModifier"]["config_groups"]["g"]["weights"]
        assert list(w.items()) == [("num_bits", 4), ("strategy", "group"), ("group_size", 64),
                                   ("actorder", None), ("symmetric", True)]


def test_a_recipe_that_is_not_utf8_names_file_and_line(tmp_path):
    from pipeline import io

    f = tmp_path / "r.yaml"
    f.write_bytes(b"# ok\n# r\xe9sum\xe9\ns: {}\n")
    with pytest.raises(io.DataError, match=r"^recipes/r\.yaml:2: not UTF-8 \(byte 0xe9 at column 4\)"):
        recipes.load_template(str(f), shown="recipes/r.yaml")
