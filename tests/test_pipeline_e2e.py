"""The whole DVC pipeline on a tiny random model made inside the test (e2e tier: a few minutes)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from scripts import dvc_deps
from tests import tiny_model
from tests.conftest import short_tasks

pytestmark = pytest.mark.e2e
# .dvcignore: stage code hashes the folder pipeline; the bytecode a stage writes into it is not code
COPY = ["dvc.yaml", ".dvcignore", "pipeline", "scripts", "eval_sets", "recipes", "calibration"]


def small_params(root: Path, models: dict) -> dict:
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = models
    p["calibration"].update(num_samples=4, max_seq_len=64)
    limits = {"translation": 3, "summarization": 2, "classification": 8}
    p["eval"]["tasks"] = short_tasks(p["eval"]["tasks"])
    for name, task in p["eval"]["tasks"].items():
        task["limit"] = limits[name]
    p["eval"]["throughput"] = {"batch_size": 2, "new_tokens": 4, "repeats": 1}
    p["eval"]["fidelity"].update(limit=2, max_tokens=24)
    # two looks, not four: at these caps (2 to 8 samples) four would mostly repeat lm-eval's start-up
    p["eval"]["sequential"] = {"looks": [0.5, 1.0]}
    # one dtype on every machine: in bfloat16 (the default on CPUs with native bf16) the tiny random
    # model's tiers all predict like its baseline, and the tolerance test below needs one that does not
    p["serving"]["reference"]["dtype"] = "float32"
    return p


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", PYTHONUNBUFFERED="1",
               **(env or {}))
    env.pop("PYTHONPATH", None)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)


def init_project(proj: Path, root: Path, params: dict) -> Path:
    """The project's files (COPY) in `proj`, `params` as its params.yaml, git and DVC initialised."""
    for name in COPY:
        src = root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, proj / name)
    (proj / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        assert run(cmd, proj).returncode == 0
    return proj


@pytest.fixture(scope="module")
def project(tmp_path_factory, request) -> Path:
    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp("proj")
    tiny_model.build(proj / "tiny-model", root)
    tiny = {"source": "local:tiny-model", "dtype": "float16"}
    return init_project(proj, root, small_params(root, {"tiny": tiny}))


def md_table(md: str, head: str) -> list[list[str]]:
    """The cells of each row of the markdown table whose header line starts with `head`."""
    lines = md.split("\n" + head, 1)[1].split("\n\n", 1)[0].splitlines()[2:]    # past the header and |---|
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]


def traced_problems(project: Path, folder: str, unseen: dict = dvc_deps.UNSEEN) -> list[str]:
    """What `python -m scripts.dvc_deps --trace <folder>` names for the stages traced there."""
    lock, dvc, params = (yaml.safe_load((project / f).read_text()) for f in ("dvc.lock", "dvc.yaml", "params.yaml"))
    traces = [json.loads(f.read_text()) for f in (project / folder).glob("*.json")]
    assert traces and {t["stage"] for t in traces} <= set(lock["stages"])
    return ([p for t in traces for p in dvc_deps.trace_problems(lock, t, project, params)]
            + dvc_deps.needless_problems(dvc, params, traces, project, unseen))


def test_repro_writes_complete_decision(project):
    r = run(["dvc", "repro"], project, env={"QTIER_TRACE": str(project / "trace")})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # every stage's data deps and params are what it read (scripts/dvc_deps.py --trace)
    assert set(traced_problems(project, "trace")) == set(), traced_problems(project, "trace")
    decision = json.loads((project / "results/decision.json").read_text())
    rows = decision["rows"]
    params = yaml.safe_load((project / "params.yaml").read_text())
    tiers, kv_modes = params["tiers"], params["kv_modes"]
    assert len(rows) == len(tiers) * len(kv_modes)
    assert {(x["tier"], x["kv"]) for x in rows} == {(t, k) for t in tiers for k in kv_modes}
    everything = {"translation/bleu", "translation/chrf", "summarization/rouge1", "summarization/rouge2",
                  "summarization/rougeL", "classification/acc", "classification/macro_f1"}
    for x in rows:
        assert x["status"] == "ok", x
        res = json.loads((project / f"results/evals/tiny/{x['tier']}-{x['kv']}/result.json").read_text())
        if "stopped" in res:      # a failed gated metric stopped it: the log-likelihood task ran first
            assert {"classification/acc", "classification/macro_f1"} <= set(x["metrics"]) < everything, x
            assert x["stopped"].startswith("stopped at look") and "not run" not in x["stopped"]
            # it stops everything: no fidelity, no load test (their KL and speed would change no verdict)
            assert res["fidelity"]["status"] == "skipped" and "skipped" in res["throughput"], res
            assert "fidelity" not in res["phases"] and "throughput" not in res["phases"]
        elif res.get("cannot_pass"):  # open at 8 items (eval.sequential.unpassable: stop): no gated task after it
            assert {"classification/acc", "classification/macro_f1"} <= set(x["metrics"]) < everything, x
            assert set(res["not_run"]) == {"translation", "summarization"}, res["not_run"]
            assert set(res["not_run"].values()) == {"cannot pass"}, res["not_run"]
        else:
            assert set(x["metrics"]) >= everything, x
            assert x["gen_tokens_per_s"] > 0
            assert set(res["phases"]) >= {"load", "tasks", "fidelity", "throughput"}, res["phases"]
        if x["tier"] != "fp16" or x["kv"] != "auto":      # every variant in looks; the baseline to its caps
            assert set(res["looks"]) >= {"classification"} and res["sample_cache"]["computed"] > 0, res
        assert x["weight_bytes"] > 0
        assert x["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * (1 if x["kv"] == "fp8" else 2)
    sizes = {x["tier"]: x["weight_bytes"] for x in rows}
    assert sizes["int4-gptq"] < sizes["int8"] < sizes["fp16"]
    assert sizes["nf4-bnb"] < sizes["int8-bnb"] < sizes["fp16"]
    md = (project / "results/decision.md").read_text()
    table = md.split("| Tier | KV cache |", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) == 1 + 1 + len(rows)
    assert "**Recommended: `" in md and "vllm serve" in md
    assert (project / "results/speed.md").read_text().startswith("# qtier speed")   # the timings, apart
    quant = json.loads((project / "results/quantize/tiny-int4-awq.json").read_text())
    assert quant["status"] == "ok" and quant["group_size"] == 64
    samples = (project / "results/evals/tiny/int4-gptq-fp8/samples/classification.jsonl").read_text().splitlines()
    looked = json.loads((project / "results/evals/tiny/int4-gptq-fp8/result.json").read_text())["looks"]
    assert len(samples) == looked["classification"]["n"] <= 8 and "logliks" in json.loads(samples[0])
    base = (project / "results/baseline/tiny/samples/classification.jsonl").read_text().splitlines()
    assert len(base) == 8 and base == (project / "results/evals/tiny/fp16-auto/samples/classification.jsonl"
                                       ).read_text().splitlines()       # the baseline's row is stage baseline's
    fp8 = json.loads((project / "results/evals/tiny/fp16-fp8/result.json").read_text())
    assert "simulated" in fp8["serving"]["kv_cache"]


def test_second_repro_runs_nothing(project):
    r = run(["dvc", "repro"], project)
    assert r.returncode == 0
    assert "Running stage" not in r.stdout, r.stdout


def test_a_report_knob_changes_decide_alone(project):
    """report: is decide's alone: editing one of its keys re-runs check (which validates any edit of
    params.yaml, in seconds, and rewrites nothing) and decide, no evaluation."""
    text = (project / "params.yaml").read_text()
    p = yaml.safe_load(text)
    p["report"]["regressions_per_task"] += 1
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    try:
        r = run(["dvc", "status", "--json"], project)
        assert r.returncode == 0 and set(json.loads(r.stdout)) == {"check", "decide"}, r.stdout
        r = run(["dvc", "repro"], project)
        ran = [line.split("'")[1] for line in r.stdout.splitlines() if line.startswith("Running stage")]
        assert r.returncode == 0 and ran == ["check", "decide"], r.stdout[-2000:]
    finally:
        (project / "params.yaml").write_text(text)
    assert run(["dvc", "repro"], project).returncode == 0


def _digest(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for d in ("artifacts", "results")
            for p in sorted((project / d).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("key, value, message", [
    ("tiers.int4-gptq.group_size", "sixty-four", "tiers.int4-gptq.group_size: expected"),
    ("tiers.int8.metod", "gptq", "tiers.int8.metod: unknown key (did you mean 'method'?)"),
    ("eval.tasks.translation.limit", 0, "eval.tasks.translation.limit: must be >= 1"),
])
def test_a_bad_edit_loses_nothing(project, key, value, message):
    """On a finished run, a mistyped entry stops `dvc repro` at the check stage with one line, before
    DVC removes any stage's outputs: every file under artifacts/ and results/ stays byte-identical."""
    text = (project / "params.yaml").read_text()
    before = _digest(project)
    p = yaml.safe_load(text)
    *path, last = key.split(".")
    d = p
    for k in path:
        d = d[k]
    d[last] = value
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    try:
        r = run(["dvc", "repro"], project)
        assert r.returncode != 0
        errors = [line for line in r.stderr.splitlines() if line.startswith("qtier:")]
        assert len(errors) == 1 and message in errors[0], r.stderr[-2000:]
        ran = [line for line in r.stdout.splitlines() if line.startswith("Running stage")]
        assert ran == ["Running stage 'check':"], ran
        assert _digest(project) == before
    finally:
        (project / "params.yaml").write_text(text)
    assert json.loads(run(["dvc", "status", "--json"], project).stdout) == {}


def test_requantizing_to_the_same_checkpoint_reruns_nothing_after_it(project):
    r = run(["dvc", "repro", "-s", "-f", "quantize@tiny-int4-gptq"], project)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(run(["dvc", "status", "--json"], project).stdout) == {}


def test_adding_a_model_adds_only_its_stages(project):
    text = (project / "params.yaml").read_text()
    p = yaml.safe_load(text)
    p["models"]["tiny-copy"] = dict(p["models"]["tiny"])
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    try:
        r = run(["dvc", "status", "--json"], project)
        assert r.returncode == 0, r.stderr
        changed = set(json.loads(r.stdout))
        assert changed, r.stdout
        # check re-validates the edited params.yaml (fast, and it changes nothing downstream)
        assert all("tiny-copy" in s for s in changed - {"decide", "check"}), changed
        # prepare, probes, fidelity_base, baseline, noise, a quantize, a kvscales and a kvrepair stage per
        # tier, an evaluate per variant
        tiers, kv_modes = p["tiers"], p["kv_modes"]
        assert sum("tiny-copy" in s for s in changed) == 5 + 3 * len(tiers) + len(tiers) * len(kv_modes)
    finally:    # the module's later tests share this project
        (project / "params.yaml").write_text(text)


def test_a_calibrated_fp8_kv_mode_end_to_end_beside_the_uncalibrated_one(project):
    """Adding `scale: calibrated`: each tier is re-made with llm-compressor's kv_cache_scheme, the new
    rows serve those checkpoints with their per-layer scales, and no existing evaluate stage re-runs."""
    text = (project / "params.yaml").read_text()
    p = yaml.safe_load(text)
    p["kv_modes"]["fp8-cal"] = {"cache_dtype": "fp8_e4m3", "scale": "calibrated"}
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    try:
        r = run(["dvc", "repro"], project, env={"QTIER_TRACE": str(project / "trace-cal")})
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        # the calibrated path reads the kvscales records and checkpoints the uncalibrated run never did
        calibrated = {k: {d: why for d, why in v.items() if "kvscales" not in d} if k == "evaluate" else v
                      for k, v in dvc_deps.UNSEEN.items() if k not in ("kvscales", "decide")}
        assert traced_problems(project, "trace-cal", calibrated) == []
        ran = [line.split("'")[1] for line in r.stdout.splitlines() if line.startswith("Running stage")]
        evaluated = sorted(s for s in ran if s.startswith("evaluate@"))
        assert evaluated == sorted(f"evaluate@tiny-{t}-fp8-cal" for t in p["tiers"]), ran
        rows = {(x["tier"], x["kv"]): x for x in json.loads((project / "results/decision.json").read_text())["rows"]}
        for tier in ("fp16", "int8", "int4-awq", "int4-gptq", "fp8"):
            record = json.loads((project / f"results/kvscales/tiny-{tier}/fp8-cal.json").read_text())
            assert record["status"] == "ok" and record["scales"]["layers"] == 2, record
            assert record["serve_path"] == f"artifacts/tiny/kvscales/{tier}/fp8-cal"
            cfg = json.loads((project / record["serve_path"] / "config.json").read_text())
            assert cfg["quantization_config"]["kv_cache_scheme"]["type"] == "float"
            row = rows[(tier, "fp8-cal")]
            assert row["status"] == "ok", row
            result = json.loads((project / f"results/evals/tiny/{tier}-fp8-cal/result.json").read_text())
            assert "calibrated per-layer scales from the checkpoint" in result["serving"]["kv_cache"]
            assert result["serving"]["kv_layers_quantized"] == 2
        # the baseline's own weights are untouched by a KV-only recipe
        fp16 = json.loads((project / "results/kvscales/tiny-fp16/fp8-cal.json").read_text())["weights_vs_tier"]
        assert fp16["identical"] == fp16["tensors"] > 0
        for tier in ("int8-bnb", "nf4-bnb"):
            assert rows[(tier, "fp8-cal")]["status"] == "unsupported"
            assert "bitsandbytes quantizes at load time" in rows[(tier, "fp8-cal")]["reason"]
        md = (project / "results/decision.md").read_text()
        # every variant is a row of the main table, the calibrated ones too, the bitsandbytes ones unsupported
        head = "| Tier | KV cache |"
        verdict = md.split("\n" + head, 1)[1].splitlines()[0].strip("|").split("|")
        verdict = [c.strip() for c in verdict].index("Verdict") + 2     # + the two cells of `head`
        main = {(c[0], c[1]): c for c in md_table(md, head)}
        assert set(main) == {(t, k) for t in p["tiers"] for k in ("auto", "fp8", "fp8-cal")}
        for tier in ("int8-bnb", "nf4-bnb"):
            assert main[(tier, "fp8-cal")][verdict].startswith("unsupported"), main[(tier, "fp8-cal")]
        # the calibrated section pairs each calibrated tier's fp8-cal row with its uncalibrated fp8 one
        pairs = {(c[0], c[1]): c[2] for c in md_table(md, "| Tier | KV mode | k/v scales |")}
        for tier in ("fp16", "int8", "int4-awq", "int4-gptq", "fp8"):
            assert pairs[(tier, "fp8-cal")] == "calibrated" and (tier, "fp8") in pairs, pairs
    finally:
        (project / "params.yaml").write_text(text)
        # here too when an assert above failed: the module's next tests start from the whole project
        r = run(["dvc", "repro"], project)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ran = [line.split("'")[1] for line in r.stdout.splitlines() if line.startswith("Running stage")]
    assert not [s for s in ran if s.startswith(("evaluate@", "quantize@"))], ran


def _project_processes(project: Path) -> list:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and Path(proc.cwd()) == project:
                found.append(proc.info)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def _wait_for_process(project: Path, needle: str, min_age_s: float, timeout_s: float):
    """A process of this project whose command line contains `needle`, running for min_age_s
    (past interpreter start-up, inside the stage's own work)."""
    import psutil

    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for p in psutil.process_iter(["cmdline", "create_time"]):
            try:
                if needle in " ".join(p.info["cmdline"] or []) and Path(p.cwd()) == project \
                        and time.time() - p.info["create_time"] >= min_age_s:
                    return p
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        time.sleep(0.2)
    return None


def test_ctrl_c_during_a_stage_stops_everything_and_keeps_results(project):
    import signal

    # evaluations (evals/, baseline/: the baseline to its caps, noise/: it again) re-run on the edit;
    # nothing else may change
    keep = {p: p.read_bytes() for p in (project / "results").rglob("*") if p.is_file()
            and not {"evals", "baseline", "noise"} & set(p.parts)}
    p = yaml.safe_load((project / "params.yaml").read_text())
    original = p["eval"]["throughput"]["new_tokens"]
    p["eval"]["throughput"]["new_tokens"] = original + 1          # every evaluate stage is now stale
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", PYTHONUNBUFFERED="1")
    env.pop("PYTHONPATH", None)
    # A shell's background job (e.g. `nohup pytest &`) inherits SIGINT ignored, and so would DVC and its
    # stages; a terminal's Ctrl-C reaches processes with the default disposition, so give DVC that.
    proc = subprocess.Popen(["dvc", "repro"], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    reader.start()                                                  # never let a full pipe stall the stage
    # an evaluate stage of the tiny model lasts ~4 s, start-up included: interrupt it well inside that
    stage = _wait_for_process(project, "pipeline.stages.evaluate", min_age_s=1.5, timeout_s=600)
    assert stage is not None, "".join(output)[-3000:]
    os.killpg(proc.pid, signal.SIGINT)                              # what Ctrl-C in a terminal does
    proc.wait(timeout=120)
    reader.join(timeout=10)
    assert proc.returncode != 0, "".join(output)[-3000:]
    time.sleep(1)
    assert _project_processes(project) == []
    for path, content in keep.items():
        assert path.read_bytes() == content, path
    p["eval"]["throughput"]["new_tokens"] = original
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    r = run(["dvc", "status", "--json"], project)
    stale = set(json.loads(r.stdout))
    # at most the interrupted stage (DVC clears a stage's outputs before running it) and decide;
    # check, probes, fidelity_base and kvrepair ran on the edited params.yaml before the interrupt, so they re-run
    # on the restored one (probes, fidelity_base and noise depend on the eval section whole: DVC cannot
    # declare the optional eval.fidelity and eval.long_context keys alone)
    # kvrepair depends on the eval section whole too (its texts may be eval.long_context's); its record is
    # constant without a repaired mode, so nothing after it re-runs for it
    assert stale <= {"decide", "check", "probes@tiny", "fidelity_base@tiny", "baseline@tiny", "noise@tiny"} | {
        s for s in stale if s.startswith(("evaluate@", "kvrepair@"))}
    # every evaluate depends on stage baseline's output: when it re-ran on the edit, they all re-run
    # (reading their samples from the sample cache); else at most the interrupted one
    if "baseline@tiny" not in stale:
        assert len([s for s in stale if s.startswith("evaluate@")]) <= 1
    r = run(["dvc", "repro"], project)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(run(["dvc", "status", "--json"], project).stdout) == {}


def test_exp_run_of_a_tolerance_change_computes_no_sample_again(tmp_path_factory, request):
    """`dvc exp run -S` tries a tolerance change: the evaluations re-run (their looks stop on the
    tolerances), and so does noise (which tasks are report-only), but they read every sample, fidelity,
    long-context probe and load test from the cache, and the metrics show the effect. On a two-tier
    project: each experiment re-runs every evaluate."""
    default = yaml.safe_load((Path(request.config.rootpath) / "params.yaml").read_text())["eval"]["tasks"]
    tasks = {name: {**t, "limit": n} for (name, t), n in zip(default.items(), (3, 2, 8))}
    project = _mini_project(tmp_path_factory, request, "exp", tasks)
    r = run(["dvc", "repro"], project)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    env_git = ["-c", "user.name=qtier-test", "-c", "user.email=qtier@localhost"]
    assert run(["git", "add", "-A"], project).returncode == 0
    r = run(["git", *env_git, "commit", "-qm", "baseline run"], project)
    assert r.returncode == 0, r.stderr
    def variant_key(res):
        return res["tier"], res["kv"]
    probed = {variant_key(res) for f in (project / "results/evals/tiny").glob("*/result.json")
              if (res := json.loads(f.read_text())).get("long_context", {}).get("status") not in (None, "skipped")}
    skipped = {variant_key(res): res.get("not_run", {}) for f in (project / "results/evals/tiny").glob("*/result.json")
               if (res := json.loads(f.read_text()))}
    passes = {}
    # a baseline "capable" of nothing, then every tolerance met: which variants pass moves from none to all,
    # whatever the tiny random model happens to score
    for name, sets in (("strict", ["decision.min_baseline.acc=101"]),
                       ("lenient", ["decision.min_baseline.acc=0", "decision.tolerances.acc.abs=100"])):
        r = run(["dvc", "exp", "run", "-n", name] + [a for s in sets for a in ("-S", s)], project)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        ran = [line for line in r.stdout.splitlines() if line.startswith("Running stage")]
        assert ran[0] == "Running stage 'check':" and ran[-1] == "Running stage 'decide':", ran
        # no quantize, no baseline; noise only when a tolerance changed (it skips report-only tasks), and
        # then from its sample cache
        noise_ran = [x for x in ran[1:-1] if "noise@" in x]
        assert noise_ran == (["Running stage 'noise@tiny':"] if name == "lenient" else []), ran
        assert all("evaluate@" in x for x in ran[1:-1] if x not in noise_ran) and len(ran) == 4 + len(noise_ran), ran
        if noise_ran:
            res = json.loads((project / "results/noise/tiny/result.json").read_text())
            assert res["status"] == "ok" and res["sample_cache"]["computed"] == 0, res.get("sample_cache")
        for res in (project / "results/evals/tiny").glob("*/result.json"):
            res = json.loads(res.read_text())
            if "copied_from" in res:        # the baseline's row: stage baseline's record, which did not re-run
                continue
            # samples are read from the cache, except a task's first read: one a variant that could not
            # pass skipped (eval.sequential.unpassable: stop) and this change lets it run
            first = set(skipped.get(variant_key(res), ())) - set(res.get("not_run", {}))
            computed = {t for t, c in res["sample_cache"].get("tasks", {}).items() if c.get("computed")}
            assert res["status"] == "ok" and computed <= first, (first, res.get("sample_cache"))
            assert res["sample_cache"]["computed"] == 0 or first, res.get("sample_cache")
            skipped[variant_key(res)] = res.get("not_run", {})
            # the long-context probe runs only on a variant that can pass: read from the cache when an
            # earlier run measured it, measured now when this change first lets the variant pass
            probe = res["long_context"]
            assert probe.get("status") != "skipped" or res.get("cannot_pass"), probe
            before = variant_key(res) in probed
            wanted = {"fidelity", "throughput"} | ({"long_context"} if before and probe.get("status") != "skipped" else set())
            assert set(res.get("reused", {})) == wanted, (res.get("reused"), probe)
            if probe.get("status") != "skipped":
                probed.add(variant_key(res))
        after = json.loads((project / "results/metrics.json").read_text())["tiny"]
        passes[name] = sum(v.get("passes", 0) for v in after.values())
    assert passes == {"strict": 0, "lenient": 1}
    shown = run(["dvc", "exp", "show", "--json"], project)
    assert shown.returncode == 0 and "lenient" in shown.stdout and "strict" in shown.stdout and "passes" in shown.stdout


# --- tasks as named entries: two of a kind, and lm-eval's own registry --------------------------------

def _mini_project(tmp_path_factory, request, name: str, tasks: dict, extra=None) -> Path:
    """A project with the tiny model, two tiers (fp16 and load-time nf4, no calibration) and one KV mode."""
    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp(name)
    for item in COPY:
        src = root / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, proj / item)
    tiny_model.build(proj / "tiny-model", root)
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = {"tiny": {"source": "local:tiny-model", "dtype": "float16"}}
    p["tiers"] = {k: p["tiers"][k] for k in ("fp16", "nf4-bnb")}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
    p["calibration"].update(num_samples=4, max_seq_len=64)
    p["eval"]["throughput"] = {"batch_size": 2, "new_tokens": 4, "repeats": 1}
    p["eval"]["tasks"] = tasks
    if extra:
        extra(proj)
    (proj / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        assert run(cmd, proj).returncode == 0
    return proj


def _user_translation(proj: Path) -> None:
    """The user's own JSONL for a second language pair, with its own field names."""
    rows = [{"english": s, "francais": f} for s, f in [
        ("The cat sleeps.", "Le chat dort."), ("It is raining today.", "Il pleut aujourd'hui."),
        ("I like green tea.", "J'aime le thé vert."), ("The train leaves at nine.", "Le train part à neuf heures.")]]
    (proj / "my_en_fr.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _local_registry_task(proj: Path) -> None:
    """An lm-eval task YAML of the user's own (dataset_path: json, local data) under my_tasks/."""
    folder = proj / "my_tasks"
    folder.mkdir()
    rows = [{"question": f"Is {i} an even number?", "answer": i % 2} for i in range(12)]
    (folder / "even.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "my_even.yaml").write_text(yaml.safe_dump({
        "task": "my_even", "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(folder / "even.jsonl")}}, "test_split": "test",
        "output_type": "multiple_choice", "doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "answer",
        "doc_to_choice": ["yes", "no"],
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                        {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1}}, sort_keys=False))


def test_two_tasks_of_each_kind_and_a_registry_task_keep_their_own_metrics_and_verdicts(tmp_path_factory, request):
    """Two translation tasks (en->de from eval_sets, en->fr from the user's JSONL with other field names),
    two classification tasks and an lm-eval registry task of the user's own (`even: {lm_eval: my_even}`,
    local data) in one project: every metric is `<task>/<metric>`, nothing is overwritten, a per-task
    tolerance changes only that task's verdict, and the registry task runs through the reference backend
    with per-sample logging and gets a paired per-sample interval and a verdict like a local task.
    (One project for both: each DVC project costs minutes of stage start-ups in CI.)"""
    cls = {"kind": "classify", "config": "eval_sets/tasks/classification.yaml", "data": "eval_sets/sentiment.jsonl",
           "fields": {"text": "text", "label": "label"}, "labels": ["negative", "positive"], "limit": 8}
    tasks = {
        "translation": {"kind": "generate", "config": "eval_sets/tasks/translation.yaml",
                        "data": "eval_sets/translation_en_de.jsonl", "languages": {"source": "English", "target": "German"},
                        "limit": 3},
        "translation_fr": {"kind": "generate", "config": "eval_sets/tasks/translation.yaml", "data": "my_en_fr.jsonl",
                           "fields": {"source": "english", "reference": "francais"},
                           "languages": {"source": "English", "target": "French"}, "limit": 3},
        # a capability floor above any accuracy: the baseline falls short of it whatever it scores
        "classification": {**cls, "min_baseline": {"acc": 101.0}},
        # the same data, scored on its own, with a tolerance no tier can miss and no capability floor
        "sentiment_lenient": {**cls, "tolerances": {"acc": {"abs": 100.0}}, "min_baseline": {"acc": 0.0}},
        "even": {"lm_eval": "my_even", "include_path": "my_tasks", "limit": 10,
                 "tolerances": {"acc": {"abs": 100.0}}, "min_baseline": {"acc": 0.0}},
    }

    def files(proj: Path) -> None:
        _user_translation(proj)
        _local_registry_task(proj)

    proj = _mini_project(tmp_path_factory, request, "tasks", tasks, files)
    r = run(["dvc", "repro"], proj)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((proj / "results/evals/tiny/nf4-bnb-auto/result.json").read_text())
    ids = {"translation/bleu", "translation/chrf", "translation_fr/bleu", "translation_fr/chrf",
           "classification/acc", "classification/macro_f1", "sentiment_lenient/acc", "sentiment_lenient/macro_f1",
           "even/acc", "even/acc_norm"}
    assert set(res["metrics"]) == ids and set(res["higher_is_better"]) == ids
    assert res["backend"] == "reference" and res["num_samples"]["even"] == 10
    assert 0.0 <= res["metrics"]["even/acc"] <= 100.0 and res["higher_is_better"]["even/acc"] is True
    even = [json.loads(x) for x in (proj / "results/evals/tiny/nf4-bnb-auto/samples/even.jsonl").read_text().splitlines()]
    assert len(even) == 10 and all(s["scores"]["acc"] in (0.0, 100.0) for s in even)
    assert sum(s["scores"]["acc"] for s in even) / 10 == pytest.approx(res["metrics"]["even/acc"])
    for task in tasks:
        assert (proj / f"results/evals/tiny/nf4-bnb-auto/samples/{task}.jsonl").is_file()
    fr = [json.loads(x) for x in (proj / "results/evals/tiny/fp16-auto/samples/translation_fr.jsonl").read_text().splitlines()]
    mine = [json.loads(x) for x in (proj / "my_en_fr.jsonl").read_text().splitlines()]
    assert fr and all(r["input"]["source"] == mine[r["doc_id"]]["english"] and r["target"] == mine[r["doc_id"]]["francais"]
                      for r in fr)
    rows = {x["tier"]: x for x in json.loads((proj / "results/decision.json").read_text())["rows"]}
    tier = rows["nf4-bnb"]
    gated = {"translation/bleu", "translation/chrf", "translation_fr/bleu", "translation_fr/chrf",
             "classification/acc", "sentiment_lenient/acc", "even/acc"}
    assert set(tier["verdicts"]) == gated
    assert set(tier["intervals"]) >= gated
    # same samples, same model: the two classification tasks agree on the score, but not on the rule
    assert tier["metrics"]["classification/acc"] == tier["metrics"]["sentiment_lenient/acc"]
    assert tier["verdicts"]["sentiment_lenient/acc"]["verdict"] == "pass"
    assert tier["verdicts"]["classification/acc"]["why"].startswith("the baseline cannot do this task")
    assert tier["task_verdicts"]["sentiment_lenient"] == "pass"
    assert tier["intervals"]["even/acc"]["n"] == 10 and tier["verdicts"]["even/acc"]["verdict"] == "pass"
    md = (proj / "results/decision.md").read_text()
    head = md.split("| Tier | KV cache |", 1)[1].splitlines()[0]
    assert all(t in head for t in tasks)
    for task in tasks:
        assert f"#### {task}" in md
    metrics = json.loads((proj / "results/metrics.json").read_text())["tiny"]["nf4-bnb-auto"]
    assert "delta_translation_fr/chrf" in metrics and "delta_sentiment_lenient/acc" in metrics
