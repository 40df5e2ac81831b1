"""SmoothQuant's and AWQ's rescalings checked before rounding (pipeline/quant/smoothing.py) on tiny
random models, their KL before rounding measured: the default Llama shape keeps llm-compressor's
mappings at rounding level; the sandwich-norm shapes (Gemma 2, Gemma 3) give a large KL under the
registry's MLP mapping and have it corrected to the norm that feeds gate/up, which folds at rounding
level through llm-compressor's own conversion of their 1 + weight norms; AWQ's registry folds on both
(model tier: transformers and llm-compressor, no download)."""
import copy
from pathlib import Path

import pytest

from pipeline.quant import recipes

pytestmark = pytest.mark.model

SHAPE = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32)
RECIPE = {"smooth_stage": {"smooth_modifiers": {"SmoothQuantModifier": {"smoothing_strength": 0.8}}}}


def tiny(config_class, **shape):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config_class(**{**SHAPE, **shape})).eval()
    with torch.no_grad():               # norms away from their init, so a wrong scale shows
        for p in model.parameters():
            if p.ndim == 1:
                p.normal_(0, 0.3)
    return model, torch.randint(0, 128, (1, 64))


def test_the_llama_shape_keeps_llm_compressor_s_mappings_and_records_them():
    from transformers import LlamaConfig

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(LlamaConfig)
    done = smoothing.checked(model, RECIPE, ids, "tiers.int8")
    recipe, used = done.recipe, done.mappings
    assert set(done.kl) == {f"SmoothQuant {m.shown()}" for m in smoothing_maps.default_mappings(model)}
    assert max(done.kl.values()) < smoothing_kl.KL_ROUNDING
    assert used == [m.as_recipe() for m in smoothing_maps.default_mappings(model)] == [
        [["re:.*q_proj", "re:.*k_proj", "re:.*v_proj"], "re:.*input_layernorm"],
        [["re:.*gate_proj", "re:.*up_proj"], "re:.*post_attention_layernorm"]]
    assert smoothing_maps.modifier(recipe)["mappings"] == used and "mappings" not in smoothing_maps.modifier(RECIPE)


@pytest.mark.parametrize("family", ["Gemma2Config", "Gemma3TextConfig"])
def test_the_sandwich_norm_mlp_mapping_is_corrected_and_folds_at_rounding_level(family):
    import transformers

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(getattr(transformers, family))
    registry = smoothing_maps.default_mappings(model)
    assert registry[1].smooth == "re:.*post_attention_layernorm"        # llm-compressor 0.14's, Llama-style
    done = smoothing.checked(model, RECIPE, ids, "tiers.int8")
    assert done.mappings == [registry[0].as_recipe(), [["re:.*gate_proj", "re:.*up_proj"], CORRECTED]]
    assert max(done.kl.values()) < smoothing_kl.KL_ROUNDING
    # the fold as llm-compressor makes it (1 + weight norms converted, w' = (1 + w) / s - 1)
    mappings = [smoothing_maps.Mapping(tuple(m[0]), m[1]) for m in done.mappings]
    smoothed = smoothing_kl.smoothed(model, mappings, ids, 0.8)
    assert "model.layers.1.pre_feedforward_layernorm.weight" in changed(model, smoothed)
    assert smoothing_kl.kl_before_rounding(model, smoothed, ids) < 1e-12     # measured 1.5e-15 to 4.2e-15


def test_an_offset_norm_llm_compressor_does_not_convert_is_refused_as_it_does_not_fold():
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2RMSNorm

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    class UnknownOffsetNorm(Gemma2RMSNorm):                 # 1 + weight, a class name not in its registry
        pass

    model, ids = tiny(Gemma2Config)
    for layer in model.model.layers:
        layer.input_layernorm.__class__ = UnknownOffsetNorm
    with pytest.raises(smoothing_maps.SmoothingError, match=r"^tiers\.int8: SmoothQuant cannot fold into "
                                                       r"model\.layers\.0\.input_layernorm \(UnknownOffsetNorm\)"):
        smoothing.checked(model, RECIPE, ids, "tiers.int8")


def test_a_mapping_no_single_norm_feeds_is_refused_naming_the_layer():
    from transformers import LlamaConfig

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(LlamaConfig)
    io, first_in = smoothing_maps.trace(model, ids)
    wrong = smoothing_maps.Mapping(("re:.*down_proj",), "re:.*post_attention_layernorm")
    with pytest.raises(smoothing_maps.SmoothingError, match=r"^tiers\.int8: SmoothQuant mapping \[re:\.\*down_proj\] <- "
                                                       r"re:\.\*post_attention_layernorm: model\.layers\.0\."
                                                       r"post_attention_layernorm's output is not the input of "
                                                       r"model\.layers\.0\.mlp\.down_proj"):
        smoothing_maps.check_mapping(model, io, first_in, wrong, "tiers.int8")


AWQ_RECIPE = {"quant_stage": {"quant_modifiers": {"AWQModifier": {"duo_scaling": True}}}}
CORRECTED = "re:.*pre_feedforward_layernorm$"


def changed(a, b) -> list[str]:
    import torch

    return [n for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()) if not torch.equal(p, q)]


def test_llm_compressor_s_smoothing_of_the_llama_shape_moves_the_logits_at_rounding_level_only():
    from transformers import LlamaConfig

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(LlamaConfig)
    smoothed = smoothing_kl.smoothed(model, smoothing_maps.default_mappings(model), ids, 0.8)
    assert "model.layers.1.post_attention_layernorm.weight" in changed(model, smoothed)    # it did smooth
    assert smoothing_kl.kl_before_rounding(model, smoothed, ids) < 1e-12       # measured 7e-17 in float32


@pytest.mark.parametrize("family", ["Gemma2Config", "Gemma3TextConfig"])
def test_the_registry_s_mlp_mapping_on_sandwich_norms_changes_the_function_and_is_refused(family):
    import transformers

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(getattr(transformers, family))
    registry = smoothing_maps.default_mappings(model)[1]
    kl = smoothing_kl.kl_before_rounding(model, smoothing_kl.smoothed(model, [registry], ids, 0.8), ids)
    assert kl > 1e-3                                            # measured 6.9e-3 (Gemma 2), 1.1e-2 (Gemma 3)
    with pytest.raises(smoothing_maps.SmoothingError, match=r"^tiers\.int8: SmoothQuant mapping \[re:\.\*gate_proj, "
                                                       r"re:\.\*up_proj\] <- re:\.\*post_attention_layernorm changes "
                                                       r"the model before rounding \(KL \d\.\d\de-0[23] > 1e-06 on the probe\); "
                                                       r"set SmoothQuantModifier\.mappings in the recipe$"):
        smoothing_kl.check_numerically(model, [registry], ids, 0.8, "tiers.int8")


def test_llm_compressor_s_oneshot_keeps_the_function_with_the_corrected_mapping_and_breaks_it_with_the_registry_s(
        tmp_path):
    """The real run: oneshot with a SmoothQuant-only recipe and calibration data. Its stage and group
    keys must end in _stage and _modifiers, or llm-compressor builds 0 modifiers and changes nothing
    (a KL of exactly 0.0)."""
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, Gemma2Config

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401
    from tests.tiny_model import tokenizer

    model, ids = tiny(Gemma2Config)
    model.save_pretrained(tmp_path)
    tokenizer(Path(__file__).parents[1], 128).save_pretrained(tmp_path)
    data = Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist()})
    kls = {}
    for smooth in ("re:.*post_attention_layernorm", CORRECTED):
        run = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
        recipe = {"smooth_stage": {"smooth_modifiers": {"SmoothQuantModifier": {
            "smoothing_strength": 0.8, "mappings": [[["re:.*gate_proj", "re:.*up_proj"], smooth]]}}}}
        oneshot(model=run, recipe=recipes.to_yaml(recipe), dataset=data, num_calibration_samples=1, log_dir=None)
        assert f"model.layers.1.{smooth.split('*')[1].rstrip('$')}.weight" in changed(model, run)
        kls[smooth] = smoothing_kl.kl_before_rounding(model, run, ids)
    assert kls["re:.*post_attention_layernorm"] > 1e-3 and kls[CORRECTED] < 1e-12, kls


def test_awq_s_registry_folds_at_rounding_level_on_the_llama_and_sandwich_norm_shapes():
    from transformers import Gemma2Config, LlamaConfig

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    for config in (LlamaConfig, Gemma2Config):
        model, ids = tiny(config)
        before = copy.deepcopy(model)
        kls = smoothing.checked(model, AWQ_RECIPE, ids, "tiers.int4-awq").kl
        assert len(kls) == 3 and max(kls.values()) < smoothing_kl.KL_ROUNDING, kls
        assert "AWQ [re:.*o_proj$] <- re:.*v_proj$" not in kls          # GQA: no layer matches, AWQ skips it
        smoothing.checked(model, RECIPE, ids, "tiers.int8")
        assert not changed(before, model)               # the checks leave the model bit-identical
    # without llm-compressor's conversion of its 1 + weight norms, AWQ's input_layernorm fold would not hold
    with pytest.raises(smoothing_maps.SmoothingError, match=r"^tiers\.int4-awq: AWQ mapping \[re:\.\*q_proj\$, "
                                                       r"re:\.\*k_proj\$, re:\.\*v_proj\$\] <- "
                                                       r"re:\.\*input_layernorm\$ changes the model before rounding"):
        smoothing_kl.check_awq(model, AWQ_RECIPE, ids, "tiers.int4-awq")


def test_a_half_precision_model_is_not_held_to_the_float32_bar():
    import torch
    from transformers import LlamaConfig

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(LlamaConfig)
    model = model.to(torch.bfloat16)
    assert smoothing_kl.check_numerically(model, smoothing_maps.default_mappings(model), ids, 0.8, "tiers.int8") == {}


def test_awq_s_fold_through_attention_holds_where_value_equality_cannot_see_it():
    """v_proj -> o_proj: o_proj reads attention's mix of v_proj's output, channel by channel, so the
    fold holds though the tensors differ (checked only where the heads match: AWQ skips GQA's)."""
    from transformers import LlamaConfig

    from pipeline.quant import smoothing, smoothing_kl, smoothing_maps  # noqa: F401

    model, ids = tiny(LlamaConfig, num_key_value_heads=2)
    kls = smoothing.checked(model, AWQ_RECIPE, ids, "tiers.int4-awq").kl
    assert kls["AWQ [re:.*o_proj$] <- re:.*v_proj$"] < smoothing_kl.KL_ROUNDING, kls
