"""Published checkpoints as tiers (pipeline/quant/published.py): the schema, check's fingerprint, the
scheme as a config.json states it, and the refusals of a checkpoint that is not the model's."""
import json

import pytest

from pipeline import config, paths
from pipeline.quant import published
from pipeline.schema import ConfigError, FieldError, Tier, parse
from pipeline.stages import check

BASE = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
        "torch_dtype": "float16"}
W8A8 = {"quant_method": "compressed-tensors", "format": "int-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True}}}}


def test_a_published_tier_names_its_checkpoint_and_nothing_to_quantize_with():
    assert Tier(method="published", checkpoint="hub:org/m-w4a16", revision="v1", hardware="int4-w4a16").revision == "v1"
    for kw, key in [({"checkpoint": "org/m"}, "checkpoint"), ({"checkpoint": "local:"}, "checkpoint"),
                    ({"checkpoint": "local:x", "recipe": "r.yaml"}, "recipe"),
                    ({"checkpoint": "local:x", "weight_bits": 4}, "weight_bits"),
                    ({"checkpoint": "local:x", "revision": "main"}, "revision")]:
        with pytest.raises(FieldError) as e:
            Tier(method="published", hardware="int4-w4a16", **kw)
        assert e.value.field == key
    with pytest.raises(FieldError, match="only a tier with method 'published'"):
        Tier(method="rtn", recipe="r.yaml", weight_bits=8, hardware="fp8-w8a8", checkpoint="local:x")


def test_with_several_models_a_published_tier_says_whose_it_is(params_dict):
    params_dict["models"]["other"] = dict(params_dict["models"]["smollm2-135m"])
    params_dict["tiers"]["pub"] = {"method": "published", "checkpoint": "local:ckpt", "hardware": "int8-w8a8"}
    with pytest.raises(ConfigError, match=r"^tiers\.pub\.model: required: which model"):
        parse(params_dict)
    params_dict["tiers"]["pub"]["model"] = "nope"
    with pytest.raises(ConfigError, match=r"^tiers\.pub\.model: 'nope' is not a model"):
        parse(params_dict)
    params_dict["tiers"]["pub"]["model"] = "other"
    assert parse(params_dict).tiers["pub"].model == "other"


def test_check_refuses_a_local_checkpoint_without_config_json(params_dict, tmp_path):
    kinds = ["int8-w8a8"]
    params_dict["tiers"] = {"fp16": params_dict["tiers"]["fp16"]}
    params_dict["tiers"]["pub"] = {"method": "published", "checkpoint": "local:ckpt", "hardware": "int8-w8a8"}
    with pytest.raises(ConfigError, match=r"^tiers\.pub\.checkpoint: no config\.json in ckpt \(folder not found\)$"):
        config.check_tiers(parse(params_dict), tmp_path, kinds)
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(ConfigError, match=r"^tiers\.pub\.checkpoint: no config\.json in ckpt$"):
        config.check_tiers(parse(params_dict), tmp_path, kinds)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(BASE))
    config.check_tiers(parse(params_dict), tmp_path, kinds)


def test_the_tier_spec_changes_with_the_checkpoint_and_only_then(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(BASE))
    (ckpt / "model.safetensors").write_bytes(b"x" * 10)
    tier = Tier(method="published", checkpoint="local:ckpt", hardware="int8-w8a8")
    first = check.tier_spec(tier, tmp_path)
    assert first.startswith(b"# published checkpoint local:ckpt\n") and b"model.safetensors 10 bytes" in first
    assert check.tier_spec(tier, tmp_path) == first
    (ckpt / "config.json").write_text(json.dumps({**BASE, "quantization_config": W8A8}))
    second = check.tier_spec(tier, tmp_path)
    assert second != first
    (ckpt / "model.safetensors").write_bytes(b"x" * 11)
    assert check.tier_spec(tier, tmp_path) not in (first, second)
    hub = Tier(method="published", checkpoint="hub:org/m", revision="abc", hardware="int8-w8a8")
    assert check.tier_spec(hub, tmp_path) == b"# published checkpoint hub:org/m@abc\n"
    assert paths.tier_recipe("pub").name == "pub.yaml"


def test_the_scheme_is_what_the_config_says():
    assert published.scheme({"torch_dtype": "bfloat16"}) == {"method": "none", "summary": "unquantized bfloat16"}
    assert published.scheme({"quantization_config": W8A8})["summary"] == "W8 int channel, A8 int token dynamic"
    w4 = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}, "kv_cache_scheme": {"num_bits": 8}}
    assert published.scheme({"quantization_config": w4})["summary"] == "W4 int group group 128, A16 + fp8 KV scales"
    assert published.scheme({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
                            )["summary"] == "gptq W4A16 group 128"
    assert published.scheme({"quantization_config": {"quant_method": "awq", "w_bit": 4, "q_group_size": 64}}
                            )["summary"] == "awq W4A16 group 64"
    assert published.scheme({"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                                     "bnb_4bit_quant_type": "nf4"}})["summary"] == "bitsandbytes nf4"
    for bad, why in [({"quant_method": "exl2"}, "exl2"), ({"quant_method": "compressed-tensors"}, "no config_groups"),
                     ({"quant_method": "gptq"}, "no bits")]:
        with pytest.raises(ValueError, match=why):
            published.scheme({"quantization_config": bad})


def test_shapes_that_differ_are_named():
    assert published.shape_mismatches(BASE, {**BASE, "quantization_config": W8A8}) == []
    assert published.shape_mismatches(BASE, {**BASE, "hidden_size": 128, "vocab_size": 600}) == [
        "hidden_size 64 vs 128", "vocab_size 512 vs 600"]
    nested = {"model_type": "gemma3", "text_config": {**BASE, "num_hidden_layers": 3}}
    assert published.shape_mismatches(BASE, nested) == ["model_type 'llama' vs 'gemma3'", "num_hidden_layers 2 vs 3"]
