"""pipeline/quant/repair.py: the layer groups never split a fused projection; the search finds the
fewest groups within its candidate budget, deterministically; the recipe promotes exactly the chosen
modules, and compressed-tensors would give them the promoted scheme."""
import random

import pytest

from pipeline.quant import recipes, repair

LLAMA_LAYER = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def names(layers: int = 3) -> list[str]:
    return [f"model.layers.{i}.{leaf}" for i in range(layers) for leaf in LLAMA_LAYER]


def test_groups_of_a_llama_model_keep_qkv_and_gate_up_together():
    gs = repair.groups(names(2))
    assert [g.name for g in gs[:4]] == ["model.layers.0.self_attn.q_proj+k_proj+v_proj", "model.layers.0.self_attn.o_proj",
                                        "model.layers.0.mlp.gate_proj+up_proj", "model.layers.0.mlp.down_proj"]
    assert len(gs) == 8 and sorted(m for g in gs for m in g.modules) == sorted(names(2))


def test_no_grouping_of_any_module_order_splits_a_fused_set():
    rng = random.Random(7)
    for _ in range(50):
        mods = names(4) + ["model.layers.0.mlp.extra_proj", "lm_head"]
        rng.shuffle(mods)
        gs = repair.groups(mods)
        home = {m: g.name for g in gs for m in g.modules}
        assert sorted(home) == sorted(mods)                      # each module in exactly one group
        for i in range(4):
            for fused in repair.FUSED:
                parent = f"model.layers.{i}.{'self_attn' if 'q_proj' in fused else 'mlp'}"
                assert len({home[f"{parent}.{leaf}"] for leaf in fused}) == 1
        assert home["model.layers.0.mlp.extra_proj"] != home["model.layers.0.mlp.gate_proj"]


def test_ranked_puts_the_most_kl_per_parameter_first_and_breaks_ties_by_name():
    sens = {"a": 2.0, "b": 2.0, "c": 1.0, "d": 3.0}
    sizes = {"a": 10, "b": 10, "c": 1, "d": 100}
    assert repair.ranked(sens, sizes) == ["c", "a", "b", "d"]


def monotone(threshold: int, n: int = 100):
    calls = []

    def kl(k: int) -> float:          # falls as groups are promoted; within a bound of 0 from `threshold` on
        calls.append(k)
        return 1.0 - k / n if k < threshold else 0.0
    return kl, calls


@pytest.mark.parametrize("threshold", [1, 2, 37, 64, 99, 100])
def test_search_finds_the_fewest_groups_meeting_the_bound(threshold):
    kl, calls = monotone(threshold)
    found = repair.search(100, kl, bound=0.0, max_candidates=12)
    assert found.chosen == threshold and "converged" in found.stopped
    assert len(calls) == len(set(calls)) <= 12
    assert repair.search(100, monotone(threshold)[0], 0.0, 12).tried == found.tried     # deterministic


def test_search_within_a_small_budget_returns_the_fewest_measured_within_the_bound():
    kl, calls = monotone(37)
    found = repair.search(100, kl, bound=0.0, max_candidates=4)
    assert len(calls) == 4 and found.chosen is not None and found.chosen >= 37
    assert found.tried[found.chosen] <= 0.0 and "budget (4) ran out" in found.stopped


def test_search_ends_at_once_when_the_uniform_tier_meets_or_nothing_does():
    assert repair.search(10, lambda k: 0.001, 0.01, 5).chosen == 0
    none = repair.search(10, lambda k: 1.0, 0.01, 5)
    assert none.chosen is None and sorted(none.tried) == [0, 10] and "all 10 groups" in none.stopped
    with pytest.raises(ValueError, match="max_candidates"):
        repair.search(10, lambda k: 1.0, 0.01, 1)


def test_effective_bits():
    assert repair.effective_bits({"a": 300, "b": 100}, ["b"], 4, 8) == pytest.approx(5.0)
    assert repair.effective_bits({"a": 300, "b": 100}, [], 4, 16) == 4.0


@pytest.mark.parametrize("path, modifier", [("recipes/gptq_w4a16.yaml", "GPTQModifier"),
                                            ("recipes/awq_w4a16.yaml", "QuantizationModifier")])
def test_promoted_recipe_adds_an_8_bit_group_of_exact_names(in_repo, path, modifier):
    from pipeline.schema import Tier

    tier = Tier(method="gptq", recipe=path, weight_bits=4, group_size=64, hardware="int4-w4a16")
    rendered = recipes.render(recipes.load_template(path), tier, 64)
    mods = ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"]
    out = repair.promoted_recipe(rendered, mods, 8)
    stage = next(iter(out.values()))["quant_modifiers"]
    groups = stage[modifier]["config_groups"]
    assert groups["group_0"] == next(iter(rendered.values()))["quant_modifiers"][modifier]["config_groups"]["group_0"]
    assert groups["promoted"]["targets"] == mods
    w = groups["promoted"]["weights"]
    assert w["num_bits"] == 8 and w["strategy"] == "channel" and "group_size" not in w
    assert w["symmetric"] == groups["group_0"]["weights"]["symmetric"]
    assert rendered != out and "promoted" not in str(rendered)                 # a new dict


def test_promoted_recipe_at_16_bits_ignores_the_modules(in_repo):
    from pipeline.schema import Tier

    tier = Tier(method="gptq", recipe="recipes/gptq_w4a16.yaml", weight_bits=4, group_size=64, hardware="int4-w4a16")
    rendered = recipes.render(recipes.load_template("recipes/gptq_w4a16.yaml"), tier, 64)
    out = repair.promoted_recipe(rendered, ["model.layers.1.self_attn.o_proj"], 16)
    mod = out["quant_stage"]["quant_modifiers"]["GPTQModifier"]
    assert mod["ignore"] == ["lm_head", "model.layers.1.self_attn.o_proj"] and "promoted" not in mod["config_groups"]


@pytest.mark.model      # compressed-tensors imports torch
def test_compressed_tensors_gives_an_exact_name_the_promoted_scheme():
    """The premise of promoted_recipe, held against the installed compressed-tensors: of the targets a
    module matches, an exact name comes before the `Linear` class (first wins, apply.py)."""
    import torch
    from compressed_tensors.utils.match import match_targets

    found = match_targets("model.layers.0.mlp.down_proj", torch.nn.Linear(2, 2),
                          ["Linear", "model.layers.0.mlp.down_proj"])
    assert found[0] == "model.layers.0.mlp.down_proj"
