"""decide.main on synthetic per-sample results: every section rendered, nothing needs a model."""
import json
import shutil
import subprocess
import sys

import pytest

from pipeline import io, paths
from pipeline.domain.hardware import machine
from pipeline.domain.result import records
from pipeline.domain.result.facts import Serving
from pipeline.report import plots
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import decide, decide_inputs
from tests import result_files

HF = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "hidden_size": 64}


REAL_PLOT = plots.quality_vs_memory

MEASURED_ON = {"cpu": {"model": "Test CPU 9000", "isa": ["avx2"], "cores": 3}, "accelerator": None,
               "torch_threads": 3, "engine": {"name": "reference", "version": "5.17.0"}}


def samples(task, n, quality):
    """quality(i) -> per-sample score for generation tasks or correct/incorrect for classify."""
    rows = []
    for i in range(n):
        if task == "classification":
            right = quality(i)
            rows.append({"id": f"c{i}", "doc_id": i, "input": {"text": f"text {i}"}, "target": 0, "choices": ["a", "b"],
                         "gold": 0, "logliks": [-1.0, -2.0] if right else [-2.0, -1.0], "pred": 0 if right else 1,
                         "prompt_chars": 100 + 10 * i, "scores": {"acc": 100.0 if right else 0.0}})
        else:
            good = quality(i)
            ref = f"Der Satz Nummer {i} ist gut."
            out = ref if good else f"Satz {i}."
            rows.append({"id": f"t{i}", "doc_id": i, "input": {"source": f"Sentence {i}", "reference": ref},
                         "target": ref, "output": out, "prompt_chars": 100 + 50 * i,
                         "scores": {"chrf": 100.0 if good else 30.0, "rouge1": 100.0 if good else 40.0,
                                    "rouge2": 100.0 if good else 20.0, "rougeL": 100.0 if good else 40.0}})
    return rows


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    p = safe_load((root / "params.yaml").read_text())
    p["models"] = {"m": {"source": "embedded:smollm2-135m-instruct", "dtype": "float16"}}
    p["tiers"] = {k: p["tiers"][k] for k in ("fp16", "int8", "int4-gptq", "nf4-bnb")}
    p["report"]["fidelity_bootstrap"]["resamples"] = 100   # the least check allows: these tests read the report
    # 40 identical translations cannot show a 1-point corpus BLEU margin (one sentence may move 100
    # points): a margin the fixture's sizes can settle
    p["eval"]["tasks"]["translation"]["tolerances"] = {"bleu": {"abs": 30.0}, "chrf": {"abs": 30.0}}
    (tmp_path / "params.yaml").write_text(safe_dump(p))
    monkeypatch.chdir(tmp_path)
    # decision.md's header asks torch whether this machine has a GPU; the unit tier imports no torch
    monkeypatch.setattr(machine, "accelerator_available", lambda: False)
    # matplotlib takes ~1 s a figure: only test_decide_renders_every_section draws the real plot
    monkeypatch.setattr(plots, "quality_vs_memory", lambda rows, metrics, out, *a, **k: None)
    src = paths.source_dir("m")
    sizes = {"fp16": 4000, "int8": 2000, "int4-gptq": 1000}
    quality = {"fp16": lambda i: True, "int8": lambda i: True, "int4-gptq": lambda i: i % 4 != 0,
               "nf4-bnb": lambda i: True}
    for tier in p["tiers"]:
        bnb = {"load_in_4bit": True} if tier == "nf4-bnb" else None
        io.atomic_write_json(paths.quantize_record("m", tier), {
            "status": "ok", "serve_path": str(src if bnb else paths.tier_dir("m", tier)), "load_quantization": bnb,
            "weight_bytes": None if bnb else sizes[tier], "storage_dtype": "float16", "geometry": HF})
        for kv in p["kv_modes"]:
            out = paths.eval_dir("m", tier, kv)
            if tier == "int8" and kv == "fp8":
                io.atomic_write_json(out / "result.json",
                                     result_files.variant("unsupported", tier=tier, kv=kv, reason="no AVX-512 here"))
                continue
            q = quality[tier]
            res = result_files.variant(tier=tier, kv=kv, num_samples={"translation": 40, "classification": 200},
                                       measured_on=MEASURED_ON,
                                       serving={"weight_bytes_serving": 1500} if tier == "nf4-bnb" else {},
                                       throughput={"gen_tokens_per_s": 50.0})
            for task, n in (("translation", 40), ("classification", 200)):
                rows = samples(task, n, q)
                io.atomic_write_jsonl(out / "samples" / f"{task}.jsonl", rows)
            res["metrics"] = {"translation/bleu": 60.0 if q(1) else 1.0, "translation/chrf": 80.0,
                              "classification/acc": 75.0 if tier == "int4-gptq" else 100.0,
                              "classification/macro_f1": 50.0}
            res["higher_is_better"] = {k: True for k in res["metrics"]}
            io.atomic_write_json(out / "result.json", res)
    return tmp_path


def test_decide_renders_every_section(project, monkeypatch):
    monkeypatch.setattr(plots, "quality_vs_memory", REAL_PLOT)
    decide.main()
    md = (project / "results/decision.md").read_text()
    data = json.loads((project / "results/decision.json").read_text())
    assert len(data["rows"]) == 8
    rows = {(r["tier"], r["kv"]): r for r in data["rows"]}
    assert rows[("int8", "fp8")]["status"] == "unsupported"
    assert "unsupported here: no AVX-512 here" in md
    assert rows[("int4-gptq", "auto")]["verdicts"]["classification/acc"]["verdict"] == "fail"
    assert rows[("int4-gptq", "auto")]["flips"]["classification"] == {"right_to_wrong": 50, "wrong_to_right": 0, "n": 200}
    # identical answers of 200: no discordant pair, the score interval's -/+2.35 (not [0, 0])
    iv = rows[("int8", "auto")]["intervals"]["classification/acc"]
    assert (iv["delta"], iv["n"], iv["discordant"]) == (0.0, 200, [0, 0]) and "se" not in iv     # no bootstrap
    assert iv["lo"] == pytest.approx(-2.349, abs=1e-3) and iv["hi"] == pytest.approx(2.349, abs=1e-3)
    assert rows[("nf4-bnb", "auto")]["weight_bytes"] == 1500
    # smallest passing: nf4-bnb (1500 B) with fp8 KV beats int8 (2000 B)
    assert data["recommended"]["m"]["tier"] == "nf4-bnb" and data["recommended"]["m"]["kv"] == "fp8"
    assert "--quantization bitsandbytes" in data["recommended"]["m"]["command"]
    assert data["per_gpu"]["m"]["A100-80G"]["tier"] == "nf4-bnb"
    # the weights chain passes down to nf4-bnb and stops at int4-gptq-auto (fail); the combinations at
    # int4-gptq-fp8, held since its weight tier is not claimed; on every GPU
    assert (f"| A100-80G | `nf4-bnb` + KV `fp8` | weights: `int4-gptq-auto` (fail); combinations: `int4-gptq-fp8` "
            f"(held) | "
            f"`{data['per_gpu']['m']['A100-80G']['command']}` |") in md
    for section in ("### Per target GPU", "### Which GPUs can serve each tier", "### Memory bill",
                    "### KV-cache quantization by input length", "### Why each verdict", "### Power",
                    "[int4-gptq-auto](regressions/m-int4-gptq-auto.md)"):
        assert section in md
    # read top-down: the recommendation, then the verdict table, before any detail
    assert md.index("**Recommended: `nf4-bnb` with KV cache `fp8`**") < md.index("| Tier | KV cache | Verdict |") \
        < md.index("## The run") < md.index("## m: details")
    assert "| int4-gptq | auto | **FAIL** | inconclusive BLEU -18.9, chrF -19.1 | **FAIL** Accuracy -25.0 | 0.0 | 256 |" in md
    reg = (project / "results/regressions/m-int4-gptq-auto.md").read_text()
    assert "## classification" in reg and "doc 0" in reg
    assert (project / "results/plots/m-quality_vs_memory.png").stat().st_size > 1000
    # power of each gated metric, from the verdict's interval: int4-gptq drops 1 in 4 classification
    # samples from 100 to 0 (sample SD 43.4; its score interval [-31.70, -19.28] implies 44.8)
    acc = rows[("int4-gptq", "auto")]["power"]["classification/acc"]
    iv = rows[("int4-gptq", "auto")]["intervals"]["classification/acc"]
    assert acc["n"] == 200 and acc["sd"] == pytest.approx((iv["hi"] - iv["lo"]) / 2 * 200 ** 0.5 / 1.959964, rel=1e-5)
    assert acc["mdd"] == pytest.approx(2.8016 * acc["sd"] / 200 ** 0.5, abs=1e-3)
    assert acc["n_for_80pct_power"] == 1750
    assert set(rows[("int8", "auto")]["power"]) == {"classification/acc", "translation/bleu", "translation/chrf"}       # gated metrics only
    assert rows[("fp16", "auto")]["power"] == {} and rows[("int8", "fp8")]["power"] == {}
    power = md.split("### Power", 1)[1]
    assert "| Variant | translation BLEU (n=40) | translation chrF (n=40) | classification Accuracy (n=200) |" in power
    # BLEU and chrF each from their own interval: no longer one sentence-chrF SD for both
    # an n80 beyond the 200 items the task holds says the pool it would take, as the close-call line does
    assert ("| int4-gptq-auto | 42.6 / 18.9 / 16 | 42.5 / 18.8 / 16 | 44.8 / 8.9 / 1,750 (more than the 200 this "
            "design reads: a pool of about 1,750) |") in power
    metrics = json.loads((project / "results/metrics.json").read_text())
    assert metrics["m"]["int4-gptq-auto"]["delta_classification/acc"] == -25.0
    # where each result was measured comes from the results (the unsupported one served nothing: no machine)
    assert "- **A**: Test CPU 9000 (avx2), 3 cores, no accelerator; torch threads 3 (7 of 7 results)" in md
    assert "- not recorded:" not in md
    assert "engine reference 5.17.0." in md and data["rows"][0]["measured_on"] == MEASURED_ON


def test_missing_result_is_a_failed_row_and_exit_1(project):
    (paths.eval_dir("m", "int4-gptq", "fp8") / "result.json").unlink()
    with pytest.raises(SystemExit) as e:
        decide.main()
    assert e.value.code == 1
    data = json.loads((project / "results/decision.json").read_text())
    failed = [r for r in data["rows"] if r["status"] == "failed"]
    assert len(failed) == 1 and "is missing" in failed[0]["reason"]
    assert (project / "results/decision.md").is_file()


@pytest.mark.parametrize("calibrated", [False, True])
def test_a_missing_serving_record_is_a_failed_row_naming_the_file(project, calibrated):
    if calibrated:           # a calibrated KV mode is served from kvscales' checkpoint, with its own record
        p = safe_load((project / "params.yaml").read_text())
        p["kv_modes"]["fp8-cal"] = {"cache_dtype": "fp8_e4m3", "scale": "calibrated"}
        (project / "params.yaml").write_text(safe_dump(p))
        for tier in p["tiers"]:
            for kv in ("auto", "fp8"):
                src, dst = paths.eval_dir("m", tier, kv), paths.eval_dir("m", tier, "fp8-cal")
                if tier != "int4-gptq" and kv == "fp8" and (src / "result.json").is_file():
                    shutil.copytree(src, dst)
                    io.atomic_write_json(paths.serving_record("m", tier, "fp8-cal", True),
                                         io.read_json(paths.quantize_record("m", tier)))
        io.atomic_write_json(paths.eval_dir("m", "int4-gptq", "fp8-cal") / "result.json",
                             io.read_json(paths.eval_dir("m", "int4-gptq", "fp8") / "result.json"))
        missing = paths.serving_record("m", "int4-gptq", "fp8-cal", True)
    else:
        missing = paths.quantize_record("m", "int4-gptq")
        missing.unlink()
    with pytest.raises(SystemExit) as e:
        decide.main()
    assert e.value.code == 1
    rows = {(r["tier"], r["kv"]): r for r in json.loads((project / "results/decision.json").read_text())["rows"]}
    failed = {k: r["reason"] for k, r in rows.items() if r["status"] == "failed"}
    expected = [("int4-gptq", "fp8-cal")] if calibrated else [("int4-gptq", "auto"), ("int4-gptq", "fp8")]
    assert sorted(failed) == sorted(expected)
    assert all(reason == f"no serving record: {missing} is missing" for reason in failed.values())
    md = (project / "results/decision.md").read_text()
    assert f"failed: no serving record: {missing} is missing" in md


def test_compute_dtype_from_the_result():
    assert result_files.measured(compute_dtype="bfloat16").compute_dtype == "bfloat16"
    assert result_files.measured(compute_dtype="torch.float32").compute_dtype == "float32"
    assert result_files.measured(compute_dtype=None).compute_dtype is None


def test_a_partial_result_stops_decide_with_one_line_naming_file_and_field(project, capsys):
    f = paths.eval_result("m", "int8", "auto")
    res = io.read_json(f)
    del res["metrics"]
    io.atomic_write_json(f, res)
    with pytest.raises(SystemExit) as e:
        decide.main()
    assert e.value.code == 1
    assert f"(ResultError: {f}: missing field 'metrics' (status ok); re-run the stage that writes it" in (
        capsys.readouterr().err)


def test_a_tier_at_another_compute_dtype_is_not_compared_with_the_baseline(project):
    for tier in ("fp16", "int8"):
        f = paths.eval_dir("m", tier, "auto") / "result.json"
        res = json.loads(f.read_text())
        res["compute_dtype"] = "float32" if tier == "fp16" else "bfloat16"
        f.write_text(json.dumps(res))
    decide.main()
    rows = {(r["tier"], r["kv"]): r for r in json.loads((project / "results/decision.json").read_text())["rows"]}
    int8 = rows[("int8", "auto")]
    assert int8["compute_dtype"] == "bfloat16" and int8["deltas"] == {} and int8["intervals"] == {}
    assert {v["verdict"] for v in int8["verdicts"].values()} == {"inconclusive"}
    assert all(v["why"].startswith("no baseline at this compute dtype (bfloat16; the reference baseline ran "
                                   "in float32)") for v in int8["verdicts"].values())
    md = (project / "results/decision.md").read_text()
    assert "| reference | bfloat16 |" in md


def test_fidelity_is_summarized_with_intervals_and_shown(project):
    out = paths.eval_dir("m", "int4-gptq", "auto")
    res = io.read_json(out / "result.json")
    res["fidelity"] = {"status": "ok", "support": "the baseline's top-4", "k": 4, "exact": False}
    io.atomic_write_json(out / "result.json", res)
    # 3 texts; token-weighted mean = (0.1*2 + 0.4*1 + 0.2*3) / 6 = 0.2
    io.atomic_write_jsonl(out / paths.FIDELITY_ROWS, [{"kl": [0.1, 0.1], "agree": [True, False]},
                                                      {"kl": [0.4], "agree": [False]},
                                                      {"kl": [0.2, 0.2, 0.2], "agree": [True, True, True]}])
    res = io.read_json(paths.eval_dir("m", "int8", "auto") / "result.json")
    res["fidelity"] = {"status": "unavailable", "why": "another backend"}
    io.atomic_write_json(paths.eval_dir("m", "int8", "auto") / "result.json", res)
    decide.main()
    rows = {(r["tier"], r["kv"]): r for r in json.loads((project / "results/decision.json").read_text())["rows"]}
    f = rows[("int4-gptq", "auto")]["fidelity"]
    assert f["kl_mean"] == pytest.approx(0.2) and f["top1_agreement"] == pytest.approx(400 / 6)
    assert f["band"] == "moderate" and f["n_texts"] == 3 and f["n_tokens"] == 6
    assert f["kl_mean_ci"][0] <= 0.2 <= f["kl_mean_ci"][1] and f["kl_mean_ci"][0] < f["kl_mean_ci"][1]
    md = (project / "results/decision.md").read_text()
    assert "### Fidelity to the baseline's next-token distributions" in md
    assert "| int4-gptq-auto | 0.2000 [" in md and "| int8-auto | unavailable: another backend |" in md
    metrics = json.loads((project / "results/metrics.json").read_text())
    assert metrics["m"]["int4-gptq-auto"]["fidelity_kl_mean"] == pytest.approx(0.2)


def test_decide_and_the_report_import_no_torch_and_no_backend(root):
    """decide turns JSON into a report: importing it must not pay for torch or load a serving backend."""
    code = ("import sys\n"
            "import pipeline.stages.decide, pipeline.report.markdown, pipeline.report.exports, pipeline.report.plots\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'pipeline.engines'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def kv_check(hf, cache_dtype, serving, block_size):
    """decide_inputs.engine_kv_check on the serving record as vLLM's backend writes it."""
    found = records.parse(Serving, {"backend": "vllm", "device": "cpu", **serving}, "serving")
    return decide_inputs.engine_kv_check(hf, cache_dtype, found, block_size)


def test_the_engine_kv_check_uses_the_planner_s_block_size_and_needs_the_engine_s_dtype():
    serving = {"kv_cache_gib": 1.0, "kv_cache_tokens": 16000, "engine": {"dtype": "torch.bfloat16"}}
    # 2 layers x 2 KV heads x 16 dims x 2 (K, V) x 2 bytes = 256 B/token: 2^30 / 256 = 4,194,304 tokens
    assert kv_check(HF, "auto", serving, 16).startswith("4,194,304 tokens (")
    assert kv_check(HF, "auto", serving, 16).endswith("x 256 B/token in blocks of 16")
    # 1.5 GiB at 256 B/token: 6,291,456 tokens, a whole number of 16-token blocks but not of 5,000-token ones
    serving["kv_cache_gib"] = 1.5
    assert kv_check(HF, "auto", serving, 16).startswith("6,291,456 tokens")
    assert kv_check(HF, "auto", serving, 5000).startswith("6,290,000 tokens")
    assert kv_check(HF, "auto", {**serving, "engine": {}}, 16) is None


@pytest.mark.parametrize("ratio, note", [(0.1, True), (0.01, False), (None, False)])
def test_the_speed_floor_is_decide_s_param(project, ratio, note):
    p = safe_load((project / "params.yaml").read_text())
    p["report"]["min_speed_vs_baseline"] = ratio
    (project / "params.yaml").write_text(safe_dump(p))
    for tier, speed in (("fp16", 100.0), ("int8", 5.0)):
        f = paths.eval_result("m", tier, "auto")
        res = io.read_json(f)
        res["throughput"]["decode_probe_tokens_per_s"] = speed
        io.atomic_write_json(f, res)
    decide.main()
    rows = {(r["tier"], r["kv"]): r for r in json.loads((project / "results/decision.json").read_text())["rows"]}
    expected = ("too slow here: 5.0 tok/s vs 100.0 for the baseline (below 0.1x, report.min_speed_vs_baseline)"
                if note else None)
    assert rows[("int8", "auto")]["load_note"] == expected and rows[("fp16", "auto")]["load_note"] is None


# SmolLM2-135M's attention: K and V per token = 2 x 30 layers x 3 KV heads x 64 dims = 11,520 elements
SMOL_KV = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 64,
           "hidden_size": 576}


def test_engine_kv_check_applies_the_planners_formula_to_the_memory_vllm_reported():
    # 0.5 GiB = 536,870,912 B; bf16: 23,040 B/token, a 16-token block 368,640 B -> 1,456 whole blocks
    # (1,456 x 368,640 = 536,739,840) = 23,296 tokens, vs the 23,000 vLLM logged: +1.29%
    serving = {"kv_cache_gib": 0.5, "kv_cache_tokens": 23_000, "engine": {"dtype": "torch.bfloat16"}}
    assert kv_check(SMOL_KV, "auto", serving, 16) == \
        "23,296 tokens (+1.29%) from 0.5 GiB x 23,040 B/token in blocks of 16"
    # fp8: 11,520 B/token, 184,320 B a block -> 2,912 blocks = 46,592 tokens, exactly what was logged
    serving["kv_cache_tokens"] = 46_592
    assert kv_check(SMOL_KV, "fp8_e4m3", serving, 16) == \
        "46,592 tokens (+0.00%) from 0.5 GiB x 11,520 B/token in blocks of 16"


def test_engine_kv_check_needs_both_figures_from_the_engine_log():
    assert kv_check(SMOL_KV, "auto", {}, 16) is None
    assert kv_check(SMOL_KV, "auto", {"kv_cache_gib": 0.5}, 16) is None
    assert kv_check(SMOL_KV, "auto", {"kv_cache_tokens": 100}, 16) is None


def test_engine_kv_check_reads_the_served_dtype_and_assumes_none():
    # float32 served: 46,080 B/token, 737,280 B a block -> 728 blocks (728 x 737,280 = 536,739,840) = 11,648
    f32 = kv_check(SMOL_KV, "auto", {"kv_cache_gib": 0.5, "kv_cache_tokens": 11_648,
                                                    "engine": {"dtype": "float32"}}, 16)
    assert f32 == "11,648 tokens (+0.00%) from 0.5 GiB x 46,080 B/token in blocks of 16"
    unrecorded = kv_check(SMOL_KV, "auto", {"kv_cache_gib": 0.5, "kv_cache_tokens": 23_296}, 16)
    assert unrecorded is None     # no dtype logged: no figure, rather than one computed for a guessed dtype


def test_a_baseline_that_loops_is_reported_before_any_verdict(project):
    base = paths.eval_dir("m", "fp16", "auto") / "samples" / "translation.jsonl"
    rows = [json.loads(x) for x in base.read_text().splitlines()]
    for r in rows[:20]:
        r["output"] = " 1 1 1 1 1 1 1"
    io.atomic_write_jsonl(base, rows)
    decide.main()
    md = (project / "results/decision.md").read_text()
    top = md.split("## m: details", 1)[0]
    assert "**Check the baseline first**" in top
    assert "| translation | 20 of 40 generations loop (e.g. '1' repeated) | prompt format" in top
    found = json.loads((project / "results/decision.json").read_text())["baseline_sanity"]["m"]
    assert [(f["task"], f["kind"]) for f in found] == [("translation", "loops")]


def test_a_sane_baseline_adds_no_section(project):
    decide.main()
    assert "Check the baseline first" not in (project / "results/decision.md").read_text()
    assert json.loads((project / "results/decision.json").read_text())["baseline_sanity"] == {"m": []}


def test_the_engine_noise_floor_is_shown_and_a_verdict_the_second_arithmetic_does_not_give_is_unstable(project):
    base = paths.eval_dir("m", "fp16", "auto") / "samples"
    out = paths.noise_dir("m")
    for task in ("translation", "classification"):
        rows = [json.loads(x) for x in (base / f"{task}.jsonl").read_text().splitlines()]
        if task == "classification":
            for r in rows[:10]:      # the second arithmetic flips ten near-tied predictions
                r.update(pred=1, logliks=[-1.0, -0.99], scores={"acc": 0.0})
        io.atomic_write_jsonl(out / "samples" / f"{task}.jsonl", rows)
    io.atomic_write_json(out / "result.json", result_files.noise(arithmetic="bf16-operands: test"))
    result = paths.eval_dir("m", "int8", "auto") / "result.json"
    res = json.loads(result.read_text())
    # evaluate's record: the second arithmetic did not settle what the first did
    res["arithmetic_check"] = {"status": "checked", "arithmetic": "bf16-operands: test", "metrics": {
        "classification/acc": {"first": "pass", "second": "inconclusive", "status": "unstable"}}}
    io.atomic_write_json(result, res)
    decide.main()
    md = (project / "results/decision.md").read_text()
    assert "Engine noise: 1 settled verdict checked under a second arithmetic (bf16-operands: test), 1 unstable" in md
    assert "### Engine noise floor" in md and "| classification/acc | -5.00 [" in md
    assert "| int8-auto | classification/acc | pass | inconclusive | **unstable** |" in md
    every = md.split("## Every variant", 1)[1]
    assert "(unstable)" in next(line for line in every.splitlines() if line.startswith("| int8 | auto |"))
    assert "unstable +0.0" in next(line for line in md.splitlines() if line.startswith("| int8 | auto |"))   # page 1
    assert "Fidelity under the second arithmetic: not measured." in md     # this noise result has no fidelity
    data = json.loads((project / "results/decision.json").read_text())
    floor = data["noise_floor"]["m"]
    assert floor["status"] == "ok" and floor["intervals"]["classification/acc"]["delta"] == pytest.approx(-5.0)
    assert floor["flips"]["classification"] == {"right_to_wrong": 10, "wrong_to_right": 0, "n": 200}
    assert floor["unstable"] == [{"variant": "int8-auto", "metric": "classification/acc", "run": "pass"}]
    int8 = next(r for r in data["rows"] if (r["tier"], r["kv"]) == ("int8", "auto"))
    v = int8["verdicts"]["classification/acc"]
    assert v["verdict"] == "inconclusive" and v["unstable"] == "pass" and v["second_arithmetic"] == "inconclusive"


def test_the_noise_floor_states_the_second_arithmetic_s_kl_against_the_baseline():
    from pipeline.report.noise import kl_line
    from pipeline.scoring.estimators.fidelity import Read, Summary
    from pipeline.domain.result.facts import Fidelity
    (line,) = kl_line(Read(Fidelity("ok"), Summary(0.0021, (0.0019, 0.0023), 0.012, (0.01, 0.014), 97.4, (96.9, 97.9),
                                                  n_texts=12, n_tokens=2002)))
    assert line.startswith("Fidelity under the second arithmetic against the baseline as run (12 texts, 2,002 tokens): "
                           "KL mean 0.0021 [0.0019, 0.0023] nats/token, p99 0.012, top-1 agreement 97.4% [96.9, 97.9]")
    assert kl_line(Read(Fidelity("failed", why="out of memory"))) == ["Fidelity under the second arithmetic: out of memory."]


def test_the_retrieval_suite_is_shown_by_length_for_every_variant(project):
    """Two retrieval lengths (scripts/retrieval_set.py's task entries): decision.md's section, decision.json
    and the plot give each variant's accuracy per length, the baseline's included, with its verdict."""
    from scripts import retrieval_set

    p = safe_load((project / "params.yaml").read_text())
    written = retrieval_set.write_sets(lambda s: len(s.split()), [300, 600], [0.5], 10, 7, ["passkey"],
                                       project / "eval_sets/retrieval")
    # the lines the script prints for eval.tasks, as a user pastes them
    entries = safe_load("\n".join(line[4:] for line in retrieval_set.entries(
        [300, 600], "tasks=passkey&depths=0.5&per_cell=10&seed=7").splitlines()))
    p["eval"]["tasks"].update(entries)
    (project / "params.yaml").write_text(safe_dump(p))
    for result in (project / "results/evals/m").glob("*/result.json"):
        res = json.loads(result.read_text())
        if res["status"] != "ok":
            continue
        variant = result.parent.name
        for n, path in written.items():
            docs = [json.loads(x) for x in path.read_text().splitlines()]
            # the baseline finds every key; int8 + fp8 KV (not in this project: unsupported) aside, the
            # variants miss one key at the longer length, int4-gptq every one
            wrong = {"fp16-auto": 0, "int4-gptq-auto": len(docs), "int4-gptq-fp8": len(docs)}.get(variant, int(n == 600))
            rows = [{"id": d["id"], "doc_id": i, "input": {"prompt": d["prompt"], "answer": d["answer"]}, "target": d["answer"],
                     "output": "0" if i < wrong else d["answer"], "prompt_chars": len(d["prompt"]),
                     "scores": {"exact_match": 0.0 if i < wrong else 100.0}}
                    for i, d in enumerate(docs)]
            io.atomic_write_jsonl(result.parent / "samples" / f"retrieval_{n}.jsonl", rows)
            res["metrics"][f"retrieval_{n}/exact_match"] = sum(r["scores"]["exact_match"] for r in rows) / len(rows)
            res["higher_is_better"][f"retrieval_{n}/exact_match"] = True
            res["num_samples"][f"retrieval_{n}"] = len(rows)
        io.atomic_write_json(result, res)
    decide.main()
    md = (project / "results/decision.md").read_text()
    section = md.split("### Long context: retrieval by length", 1)[1]
    assert "| Variant | 300 tokens | 600 tokens | non-inferior up to |" in section
    assert "| fp16-auto | 100.0% | 100.0% | baseline |" in section
    assert "| int4-gptq-auto | 0.0% (-100.0 [-100.0, -37.6]) fail | 0.0% (-100.0 [-100.0, -37.6]) fail | - |" in section
    # 10 samples: one miss at 600 tokens is not settled either way with a 5-point allowed drop, and
    # neither is no miss (the score interval of 0 discordant pairs in 10 reaches well below -5)
    assert "| nf4-bnb-fp8 | 100.0% (+0.0 [-34.5, +34.5]) inconclusive | 90.0% (-10.0 [-45.9, +27.3]) inconclusive |" in section
    data = json.loads((project / "results/decision.json").read_text())["retrieval"]["m"]
    by = {e["variant"]: e for e in data}
    assert set(by) == {"fp16-auto", "fp16-fp8", "int8-auto", "int4-gptq-auto", "int4-gptq-fp8", "nf4-bnb-auto",
                       "nf4-bnb-fp8"}
    assert [x["tokens"] for x in by["fp16-auto"]["lengths"]] == [300, 600]
    assert by["int4-gptq-auto"]["up_to"] is None and by["int4-gptq-auto"]["lengths"][0]["verdict"] == "fail"
    assert by["int4-gptq-auto"]["lengths"][0]["interval"] == [-100.0, pytest.approx(-37.6, abs=0.05)]
    assert (project / "results/plots/m-retrieval_by_length.png").stat().st_size > 1000


def test_the_quality_plot_has_a_panel_per_gated_metric_the_model_can_do_and_names_its_intervals(project, monkeypatch):
    p = safe_load((project / "params.yaml").read_text())
    p["eval"]["tasks"]["translation"]["min_baseline"] = {"bleu": 1000.0, "chrf": 1000.0}   # the baseline cannot translate
    (project / "params.yaml").write_text(safe_dump(p))
    drawn = {}
    monkeypatch.setattr(plots, "quality_vs_memory",
                        lambda rows, metrics, out, title, *a, **k: drawn.update(metrics=metrics, title=title))
    decide.main()
    assert drawn["metrics"] == ["classification/acc"]
    assert "repeated interval: 2.5% a side over all looks" in drawn["title"] and "95% CI" not in drawn["title"]
