"""SmoothQuant's mappings checked before rounding (pipeline/quant/smoothing.py) on tiny random models:
the default Llama shape keeps llm-compressor's mappings as they are; the sandwich-norm shape (Gemma 2)
has its MLP mapping corrected to the norm that feeds gate/up, and is refused since its norms multiply
by 1 + weight (model tier: transformers and llm-compressor, no download)."""
import pytest

pytestmark = pytest.mark.model

SHAPE = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, head_dim=32)
RECIPE = {"smooth_stage": {"smooth_modifiers": {"SmoothQuantModifier": {"smoothing_strength": 0.8}}}}


def tiny(config_class):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config_class(**SHAPE)).eval()
    with torch.no_grad():               # norms away from their init, so a wrong scale shows
        for p in model.parameters():
            if p.ndim == 1:
                p.normal_(0, 0.3)
    return model, torch.randint(0, 128, (1, 16))


def test_the_llama_shape_keeps_llm_compressor_s_mappings_and_records_them():
    from transformers import LlamaConfig

    from pipeline.quant import smoothing

    model, ids = tiny(LlamaConfig)
    recipe, used = smoothing.checked(model, RECIPE, ids, "tiers.int8")
    assert used == [m.as_recipe() for m in smoothing.default_mappings(model)] == [
        [["re:.*q_proj", "re:.*k_proj", "re:.*v_proj"], "re:.*input_layernorm"],
        [["re:.*gate_proj", "re:.*up_proj"], "re:.*post_attention_layernorm"]]
    assert smoothing.modifier(recipe)["mappings"] == used and "mappings" not in smoothing.modifier(RECIPE)


def test_the_sandwich_norm_mlp_mapping_is_corrected_then_refused_as_it_does_not_fold():
    from transformers import Gemma2Config

    from pipeline.quant import smoothing

    model, ids = tiny(Gemma2Config)
    registry = smoothing.default_mappings(model)
    assert registry[1].smooth == "re:.*post_attention_layernorm"        # llm-compressor 0.14's, Llama-style
    io, first_in = smoothing.trace(model, ids)
    fixed = [smoothing.check_mapping(model, io, first_in, m, "tiers.int8") for m in registry]
    assert fixed[0] == registry[0]
    assert fixed[1] == smoothing.Mapping(("re:.*gate_proj", "re:.*up_proj"), "re:.*pre_feedforward_layernorm$")
    with pytest.raises(smoothing.SmoothingError, match=r"^tiers\.int8: SmoothQuant cannot fold into "
                                                       r"model\.layers\.0\.input_layernorm \(Gemma2RMSNorm\)"):
        smoothing.checked(model, RECIPE, ids, "tiers.int8")


def test_a_mapping_no_single_norm_feeds_is_refused_naming_the_layer():
    from transformers import LlamaConfig

    from pipeline.quant import smoothing

    model, ids = tiny(LlamaConfig)
    io, first_in = smoothing.trace(model, ids)
    wrong = smoothing.Mapping(("re:.*down_proj",), "re:.*post_attention_layernorm")
    with pytest.raises(smoothing.SmoothingError, match=r"^tiers\.int8: SmoothQuant mapping \[re:\.\*down_proj\] <- "
                                                       r"re:\.\*post_attention_layernorm: model\.layers\.0\."
                                                       r"post_attention_layernorm's output is not the input of "
                                                       r"model\.layers\.0\.mlp\.down_proj"):
        smoothing.check_mapping(model, io, first_in, wrong, "tiers.int8")
