import dataclasses

from pipeline.domain.result import records
from pipeline.domain.result.facts import Fidelity, KvWrite, Serving, TokenizerCheck
from pipeline.domain.result.serving_record import Repair
from pipeline.scoring.estimators.fidelity import Read as FidelityRead, Summary
from pipeline.report import exports, fidelity, gpus, markdown, provenance, serving, speed
from pipeline.report.document import Header, KvPair, ModelReport
from pipeline.schema import Baseline, Decision, FidelityBootstrap, Memory, TargetGpu, Tolerance
from pipeline.scoring.verdict import judge
from pipeline.scoring.pick import recommend
from pipeline.scoring.pick.recommend import Recommendation
from pipeline.scoring.verdict.rows import Evidence
from pipeline.scoring.planning.power import Power
from pipeline.scoring.estimators.stats import Interval
from tests import result_files

BASE = Baseline("fp16", "auto")
HEADER = Header(generated="now", kv_scales={"fp8": "1.0"}, baseline=BASE, confidence=0.95,
                fidelity_bootstrap=FidelityBootstrap(),
                budget=Memory({"A100-80G": TargetGpu(80, 2039, 8.0)}), gpus={"A100-80G": TargetGpu(80, 2039, 8.0)},
                hardware_docs="0.15.1")
RULE = Decision(BASE, {"acc": Tolerance(abs=3.0), "bleu": Tolerance(abs=1.0)}, {"bleu": 5.0})


def facts(tier, kv, status="ok", **kw):
    # the records as result.json holds them, typed as decide reads them (result_files: through the parser)
    if "tokens_per_s" in kw:        # the batched generation speed: result.json's throughput
        kw["throughput"] = {"gen_tokens_per_s": kw.pop("tokens_per_s"), **(kw.get("throughput") or {})}
    if isinstance(kw.get("repair"), dict):
        kw["repair"] = records.parse(Repair, kw["repair"], "repair")
    return result_files.measured(tier, kv, status, scheme=tier, hardware="fp16" if tier == "fp16" else "int4-w4a16", **kw)


def judged(found, evidence, rule=RULE):
    return judge.judge(found, {f.key: e for f, e in zip(found, evidence) if e is not None}, rule)


def rows(rule=RULE):
    found = [facts("fp16", "auto", backend="reference", compute_dtype="float32", metrics={"classification/acc": 90.0, "translation/bleu": 0.3},
                   weight_bytes=2**20 * 258, kv_bytes_per_token=23040, tokens_per_s=50.0),
             facts("int4", "fp8", backend="reference", compute_dtype="float32", metrics={"classification/acc": 89.0, "translation/bleu": 0.2},
                   weight_bytes=2**20 * 100, kv_bytes_per_token=11520, tokens_per_s=48.0),
             facts("int8", "fp8", "unsupported", reason="FP8 KV cache on CPU requires AVX-512")]
    ev = Evidence({"classification/acc": -1.0, "translation/bleu": -0.1},
                  {"classification/acc": Interval(-1.0, -2.0, 0.0, 160), "translation/bleu": Interval(-0.1, -0.3, 0.1, 40)},
                  {"classification/acc": Power(10.0, 160, 2.2, 88)})
    return judged(found, [None, ev, None], rule)


def model_report(rs, rec=None, why="", command=None):
    return ModelReport(name="m", source="embedded:x", rows=rs, recommendation=Recommendation(rec, why, command),
                       num_samples={"classification": 160})


def test_render_has_every_row_reason_and_command():
    rs = rows()
    best = recommend.recommend(rs, "m")
    md = markdown.render({"m": model_report(rs, best.row, best.why, "vllm serve x")}, HEADER)
    prefixes = ("| fp16 | auto |", "| int4 | fp8 |", "| int8 | fp8 |")
    page1, every = md.split("## Every variant", 1)
    for part in (page1, every):
        assert [next(p for p in prefixes if line.startswith(p)) for line in part.splitlines()
                if line.startswith(prefixes)] == list(prefixes)
    # it opens with the recommendation, why and the command, then what a pass means, then the table
    top = md.split("\n\n")
    assert top[1].splitlines()[0] == "**Recommended: `int4` with KV cache `fp8`** for m.  "
    assert " ".join(top[1].split()).startswith(f"**Recommended: `int4` with KV cache `fp8`** for m. Why: {best.why}.")
    assert top[1].splitlines()[-1] == "Serve: `vllm serve x` (sized per target GPU under *Per target GPU*)."
    assert "| Tier | KV | Verdict | classification | recovery | Weights MiB |" in page1    # translation: not capable
    assert every.lstrip().startswith("| Tier | KV cache | Verdict | classification | translation | Weights (MiB) |")
    assert "| int4 | fp8 | pass | pass Accuracy -1.0 | not capable | 100.0 | 11,520 |" in md
    assert "| int8 | fp8 | unsupported here: FP8 KV cache on CPU requires AVX-512 | – | – |" in md
    assert "0.2 (-0.1 [-0.3, +0.1], inconclusive)" in md and "89.0 (-1.0 [-2.0, +0.0], pass)" in md
    assert "90.0 (baseline)" in md
    assert "| Variant | Scheme | Backend | Compute |\n|---|---|---|---|\n| fp16-auto | fp16 | reference | float32 |" in md
    # why: bleu is not capable on every variant, said once; acc's limit and n once, in its column head
    assert ("- translation BLEU: not judged on any variant: the baseline cannot do this task (baseline 0.3 < "
            "min_baseline 5).") in md
    assert "| Variant | Verdict | classification Accuracy: interval vs -3.00 (n=160) | Largest regressions |" in md
    assert "| int4-fp8 | pass | pass [-2.00, +0.00] | – |" in md
    assert "| Variant | classification Accuracy (n=160) |\n|---|---|\n| int4-fp8 | 10.0 / 2.2 / 88 |" in md
    data = exports.decision_json({"m": model_report(rs, best.row, best.why, "vllm serve x")}, HEADER)
    assert data["rows"][1]["power"] == {"classification/acc": {"sd": 10.0, "n": 160, "mdd": 2.2, "n_for_80pct_power": 88}}
    assert data["rows"][0]["power"] == {} and data["rows"][0]["compute_dtype"] == "float32"


def test_render_without_recommendation_says_why():
    md = markdown.render({"m": model_report(rows()[:1], None, "no variant passes")}, HEADER)
    assert "**m: no tier can be recommended**: no variant passes." in md


def test_hardware_table_lists_target_gpus():
    lines = gpus.hardware_table(model_report(rows()), HEADER.gpus)
    assert any("int4" in x and "A100-80G (SM >= 8)" in x for x in lines)


def vllm_rows():
    budget = {"min_decode_tok_s": None, "max_wall_s": 1200}
    slo = {"slo": {"ttft_ms": 2000, "tpot_ms": 200, "percentile": 99}, "max_concurrency_meeting_slo": 6,
           "goodput_at_that_concurrency": 1.25, "stopped": "converged", "probes": [{"concurrency": 1}] * 5}
    found = [facts("fp16", "auto", backend="vllm", weight_bytes=10**9, tokens_per_s=40.0, serving={"budget": budget},
                   throughput={"slo": slo, "roofline": {"source": "tpot", "decode_tokens_per_s": 25.0, "fraction": 0.25,
                                                        "roofline_tokens_per_s": 100.0}}),
             facts("int4", "auto", backend="vllm", weight_bytes=3 * 10**8, tokens_per_s=5.0, serving={"budget": budget},
                   throughput={"roofline": {"source": "probe", "decode_tokens_per_s": 5.0,
                                            "unknown": "bandwidth unknown (serving.bandwidth_gbps)"}}),
             facts("w8a8", "auto", backend="vllm", tokens_per_s=1.0, serving={"budget": budget}, throughput={
                 "skipped": "too slow here: 1.0 tok/s vs 2 (serving.vllm.budget.min_decode_tok_s)",
                 "decode_probe_tokens_per_s": 1.0})]
    return judged(found, [None, None, None])


def test_serving_section_shows_slo_roofline_and_the_speed_floor():
    m = dataclasses.replace(model_report(vllm_rows()), min_speed_vs_baseline=0.5)     # report.min_speed_vs_baseline
    md = "\n".join(serving.load_lines(m, BASE))
    assert "| fp16-auto | p99 TTFT <= 2000 ms, TPOT <= 200 ms | 6 | 1.25 | 5 (converged) | 25.0 | 25% of 100 tok/s |" \
        in md
    assert "| int4-auto | – | – | – | – | 5.0 | bandwidth unknown (serving.bandwidth_gbps) |" in md
    assert ("- int4-auto: too slow here: 5.0 tok/s vs 25.0 for the baseline (below 0.5x, "
            "report.min_speed_vs_baseline)") in md
    # below both floors: the relative one (decide) and the absolute one that skipped its load test (evaluate)
    assert ("- w8a8-auto: too slow here: 1.0 tok/s vs 25.0 for the baseline (below 0.5x, report."
            "min_speed_vs_baseline); too slow here: 1.0 tok/s vs 2 (serving.vllm.budget.min_decode_tok_s)") in md
    assert "- fp16-auto:" not in md
    data = exports.decision_json({"m": m}, HEADER)
    assert data["rows"][0]["load"]["slo"]["max_concurrency_meeting_slo"] == 6 and data["rows"][0]["load_note"] is None
    assert data["rows"][1]["load_note"].startswith("too slow here: 5.0 tok/s vs 25.0 for the baseline")
    # the floor is decide's param, not what evaluate recorded: a lower one, or none, lets int4 through
    for ratio in (0.1, None):
        lenient = dataclasses.replace(m, min_speed_vs_baseline=ratio)
        assert exports.decision_json({"m": lenient}, HEADER)["rows"][1]["load_note"] is None
    assert "- int4-auto:" not in "\n".join(serving.load_lines(dataclasses.replace(m, min_speed_vs_baseline=None), BASE))
    # timings are speed.md's: decision.md keeps the engine's facts and none of the load figures
    md = markdown.render({"m": m}, HEADER)
    assert "### Served by vLLM" in md and "TTFT" not in md and "too slow here" not in md and "Startup" not in md
    assert "too slow here: 5.0 tok/s" in speed.render({"m": m}, HEADER)


def fid(support, kl_mean=0.1, kl_mean_ci=(0.09, 0.11)):
    return FidelityRead(Fidelity("ok", support=support),
                        Summary(kl_mean, kl_mean_ci, 1.0, (0.9, 1.1), 90.0, (89.0, 91.0), n_texts=2, n_tokens=10))


def test_calibrated_kv_rows_sit_beside_the_uncalibrated_ones():
    rs = rows()[:2]
    cal = facts("int4", "fp8-cal", backend="reference", compute_dtype="float32", metrics={"classification/acc": 89.5, "translation/bleu": 0.2},
                weight_bytes=2**20 * 100, kv_bytes_per_token=11520,
                fidelity=fid("exact", 0.0123, (0.011, 0.014)))
    ev = [None, rs[1].evidence,
          Evidence({"classification/acc": -0.5}, {"classification/acc": Interval(-0.5, -1.5, 0.5, 160),
                                                  "translation/bleu": Interval(-0.1, -0.3, 0.1, 40)})]
    rs = judged([r.facts for r in rs] + [cal], ev, Decision(BASE, {"acc": Tolerance(abs=3.0)}, {}))
    m = model_report(rs)
    assert fidelity.kv_scale_lines(m, BASE) == []          # no calibrated mode in params
    m.kv_pairs = [KvPair("fp8", 1.0, "fp8-cal")]
    lines = fidelity.kv_scale_lines(m, BASE)
    body = [line for line in lines if line.startswith("| int4 |")]
    assert body[0].startswith("| int4 | fp8 | 1.0 (uncalibrated) | 89.0 (-1.0 [-2.0, +0.0], pass) |")
    assert body[1].startswith("| int4 | fp8-cal | calibrated | 89.5 (-0.5 [-1.5, +0.5], pass) |")
    assert "0.0123 [0.0110, 0.0140]" in body[1] and body[0].split(" | ")[-2] == "–"
    assert "### fp8 KV cache: calibrated scales beside uncalibrated" in markdown.render({"m": m}, HEADER)
    # the uncalibrated mode's own scale, not vLLM's default
    m.kv_pairs = [KvPair("fp8", 0.5, "fp8-cal")]
    lines = fidelity.kv_scale_lines(m, BASE)
    assert "uses its `kv_modes.<mode>.scale` (`fp8`: 0.5; vLLM's default is 1.0)" in lines[2]
    assert [line for line in lines if line.startswith("| int4 | fp8 |")][0].startswith("| int4 | fp8 | 0.5 (uncalibrated) |")


def test_kv_scale_pairs_match_cache_dtypes():
    from pipeline.schema import KvMode
    from pipeline.stages.decide import kv_scale_pairs

    modes = {"auto": KvMode("auto"), "fp8": KvMode("fp8_e4m3"), "fp8-cal": KvMode("fp8_e4m3", "calibrated")}
    assert kv_scale_pairs(modes) == [KvPair("fp8", 1.0, "fp8-cal")]
    assert kv_scale_pairs({**modes, "fp8": KvMode("fp8_e4m3", 0.5)}) == [KvPair("fp8", 0.5, "fp8-cal")]
    assert kv_scale_pairs({k: modes[k] for k in ("auto", "fp8")}) == []


def test_each_fidelity_support_note_names_only_the_backends_it_describes():
    ref = dataclasses.replace(rows()[1].facts, fidelity=fid("exact"))
    srv = facts("int4", "fp8", backend="vllm", compute_dtype="bfloat16", fidelity=fid("top-20"))
    lines = fidelity.fidelity_lines(model_report(judged([ref, srv], [None, None])))
    assert "KL support (reference): exact." in lines and "KL support (vllm): top-20." in lines


EPYC = {"cpu": {"model": "AMD EPYC 9B14", "isa": ["avx2", "avx512f", "avx512_bf16"], "cores": 2}, "accelerator": None,
        "torch_threads": 2, "engine": {"name": "reference", "version": "5.17.0"}}
H100 = {"cpu": {"model": "Intel Xeon", "isa": ["avx2"], "cores": 26}, "accelerator": {"name": "H100", "capability": "9.0"},
        "torch_threads": None, "engine": {"name": "vllm", "version": "0.11.0"}}


def test_each_row_and_the_header_say_where_the_result_was_measured_from_the_result():
    found = [facts("fp16", "auto", backend="reference", metrics={"classification/acc": 90.0}, serving={}, measured_on=EPYC),
             facts("int4", "auto", backend="vllm", metrics={"classification/acc": 89.0}, serving={}, measured_on=H100),
             facts("int8", "auto", backend="vllm", metrics={"classification/acc": 89.0},
                   serving={"engine": {"vllm_version": "0.10.1"}}),                   # no measured_on
             facts("nf4", "auto", "failed", reason="no result: x is missing")]         # no result: measured nothing
    md = markdown.render({"m": model_report(judged(found, [None] * 4), None, "none")},
                         dataclasses.replace(HEADER, versions={"torch": "2.13.0"}))
    table = md.split("| Tier | KV cache | Verdict |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    cells = {line.split(" | ")[0][2:]: line.split(" | ")[-1][:-2] for line in table}
    assert cells == {"fp16": "A", "int4": "B", "int8": "not recorded", "nf4": "–"}
    assert ("- **A**: AMD EPYC 9B14 (avx2, avx512f, avx512_bf16), 2 cores, no accelerator; torch threads 2 "
            "(1 of 3 results)") in md
    assert "- **B**: Intel Xeon (avx2), 26 cores, H100 (compute capability 9.0); torch threads not recorded" in md
    assert "- not recorded: 1 of 3 results record no `measured_on`" in md
    assert ("Versions (evaluate's environment, as recorded in the results): torch 2.13.0, engine reference 5.17.0, "
            "vllm 0.11.0.") in md
    data = exports.decision_json({"m": model_report(judged(found, [None] * 4))}, HEADER)
    assert data["machines"] == {"A": "AMD EPYC 9B14 (avx2, avx512f, avx512_bf16), 2 cores, no accelerator",
                                "B": "Intel Xeon (avx2), 26 cores, H100 (compute capability 9.0)"}
    assert data["rows"][1]["measured_on"] == H100 and data["rows"][2]["measured_on"] is None
    assert "hardware" not in data


def test_the_speed_column_names_the_device_the_results_record():
    cpu = facts("fp16", "auto", tokens_per_s=10.0, serving={}, measured_on=EPYC)
    gpu = facts("int4", "auto", tokens_per_s=90.0, serving={}, measured_on=H100)
    unrecorded = facts("int8", "auto", tokens_per_s=5.0, serving={"device": "cpu"})
    head = lambda *fs: provenance.speed_header(judged(list(fs), [None] * len(fs)))
    assert head(cpu) == "Gen tok/s (CPU)" and head(gpu) == "Gen tok/s (H100)" and head(unrecorded) == "Gen tok/s"
    assert head(cpu, gpu) == "Gen tok/s"                       # mixed: Measured on says which
    m = {"m": model_report(judged([gpu], [None]))}
    assert "| Variant | Gen tok/s (H100) | Evaluate stage (s) | Measured on |" in speed.render(m, HEADER)
    assert "Gen tok/s" not in markdown.render(m, HEADER) and "[speed.md](speed.md)" in markdown.render(m, HEADER)


def test_the_notes_name_the_run_s_confidence_and_kv_scales():
    head = dataclasses.replace(HEADER, confidence=0.9, kv_scales={"fp8": "0.5", "fp8-cal": "calibrated"})
    # the verdicts read at the run's confidence too: page 1 names each interval's own
    md = markdown.render({"m": model_report(rows(dataclasses.replace(RULE, confidence=head.confidence)))}, head)
    assert "one-sided test at 5.0% a side (90% two-sided)" in md and "its 90% interval" in md and "95%" not in md
    assert "each KV mode's k/v scale (`fp8` 0.5, `fp8-cal` calibrated; 1.0 is vLLM's default" in md


def test_one_machine_is_one_key_whatever_its_sessions_recorded():
    """evaluate records an unsupported row's machine without a session (no threads, no engine version)."""
    unsupported = {**EPYC, "torch_threads": None, "engine": {"name": "reference", "version": None}}
    found = [facts("fp16", "auto", serving={}, measured_on=EPYC), facts("int4", "auto", "unsupported", serving={},
                                                                       measured_on=unsupported)]
    rows = judged(found, [None, None])
    assert provenance.machines(rows) == {"AMD EPYC 9B14 (avx2, avx512f, avx512_bf16), 2 cores, no accelerator": "A"}
    assert "; torch threads 2 (2 of 2 results)" in "\n".join(provenance.header_lines(rows, {}))
    assert provenance.engine(rows[1]) == "reference (version not recorded)"
    assert provenance.engines_of(rows) == ["reference 5.17.0"] and provenance.engines_of(rows[1:]) == [
        "reference (version not recorded)"]


def test_the_compute_column_names_the_w8a8_arithmetic_the_reference_recorded():
    from pipeline.report.quality import compute_cell

    line = "int8 W8A8 as vLLM: exact integer sums, float32 scales, per-token activations"
    assert compute_cell(Serving("reference", "cpu", w8a8_arithmetic=line), "float32") == f"float32; {line}"
    assert compute_cell(Serving("reference", "cpu"), "bfloat16") == "bfloat16"      # not W8A8
    assert compute_cell(None, None) == "–"


def test_a_task_without_a_tolerance_shows_its_deltas_as_not_gated():
    from pipeline.report.cells import task_cell

    found = [facts("fp16", "auto", metrics={"classification/acc": 90.0, "retrieval_4096/exact_match": 100.0}),
             facts("int4", "fp8", metrics={"classification/acc": 89.0, "retrieval_4096/exact_match": 66.7})]
    ev = Evidence({"classification/acc": -1.0, "retrieval_4096/exact_match": -33.3},
                  {"classification/acc": Interval(-1.0, -2.0, 0.0, 160)})
    _, int4 = judged(found, [None, ev])
    assert task_cell(int4, "retrieval_4096", BASE) == "not gated: Exact match -33.3"
    assert task_cell(int4, "classification", BASE) == "pass Accuracy -1.0"


def test_how_the_engine_stored_fp8_kv_is_said_under_the_variants_once_per_finding():
    from pipeline.report.quality import variants_table

    trunc = {"rounding": "truncation", "values": 12288, "as_nearest": 0.546, "as_truncation": 1.0}
    found = [facts("fp16", "auto", backend="vllm", serving={"backend": "vllm", "device": "cpu"}),
             facts("fp16", "fp8", backend="vllm", serving={"backend": "vllm", "device": "cpu", "kv_write": trunc}),
             facts("int8", "fp8", backend="vllm", serving={"backend": "vllm", "device": "cpu", "kv_write": trunc})]
    text = "\n".join(variants_table(model_report(judged(found, [None, None, None]))))
    assert text.count("truncated toward zero") == 1
    assert "variant: fp16-fp8, int8-fp8)" in text and "55% as round-to-nearest" in text and "further from the baseline than a GPU's would" in text
    none = "\n".join(variants_table(model_report(rows())))
    assert "as the engine stored them" not in none       # the reference backend reads no engine


def test_an_engine_write_that_could_not_be_read_says_why():
    from pipeline.report.quality import kv_write_sentence

    assert kv_write_sentence(KvWrite(None, why="exit 1")) == "not read (exit 1)"
    near = kv_write_sentence(KvWrite("nearest", values=10, as_nearest=1.0, as_truncation=0.5))
    assert near.startswith("rounded to nearest (50% of 10 values as truncation, 100% as round-to-nearest)")


def test_an_overridden_tokenizer_check_is_on_page_one():
    rs = rows()
    base = result_files.replaced(rs[0].facts, tokenizer_check=TokenizerCheck(["1.00 characters per token"], True))
    rs = judged([base] + [r.facts for r in rs[1:]], [None, rs[1].evidence, None])
    md = markdown.render({"m": model_report(rs, rs[0], "the baseline", "vllm serve x")}, HEADER)
    page1 = md.split("\n## ", 1)[0]
    assert "**Tokenizer check overridden** (`models.m.check_tokenizer: false`): 1.00 characters per token." in page1
    clean = markdown.render({"m": model_report(rows(), rows()[0], "the baseline", "vllm serve x")}, HEADER)
    assert "Tokenizer check" not in clean


def test_the_kv_by_length_table_leaves_out_empty_buckets():
    from types import SimpleNamespace as NS

    from pipeline.report.fidelity import kv_length_lines
    buckets = [NS(lo=0, hi=400, n=960, delta=-0.42), NS(lo=400, hi=800, n=0, delta=None),
               NS(lo=800, hi=None, n=3, delta=0.0)]
    (row,) = [line for line in kv_length_lines(NS(kv_length=[NS(variant="a-fp8", reference="a-auto",
                                                               task="c", buckets=buckets)])) if "a-fp8" in line]
    assert "0-400: n=960, -0.42; 800-∞: n=3, +0.00" in row and "n=0" not in row


def test_why_each_verdict_says_once_why_a_stopped_variant_did_not_run_a_task():
    """Its row says where it stopped (not the list of tasks it left, which its cells say); a metric whose
    task it never ran reads "not run (<why>)" from its verdict's state (rows.NOT_RUN), not "inconclusive"."""
    from pipeline.report.verdicts import stopped, verdict_cell
    from pipeline.scoring.verdict.rows import Judgement, Row, Verdict

    where = "stopped at look 1 of 4 of c (320 of 1280 samples): c/acc failed"
    rule = Decision(BASE, {"acc": Tolerance(abs=3.0), "rougeL": Tolerance(abs=1.0)})
    ev = Evidence({"c/acc": -30.0}, {"c/acc": Interval(-30.0, -34.0, -26.0, 160)})

    def variant(base_metrics, **kw):
        found = [facts("fp16", "auto", metrics=base_metrics), facts("int4", "auto", metrics={"c/acc": 60.0}, **kw)]
        return judged(found, [None, ev], rule)[1]
    r = variant({"c/acc": 90.0, "s/rougeL": 30.0}, stopped=where, not_run={"s": "the variant failed"})
    assert stopped(r) == where
    assert verdict_cell(r, "s/rougeL", True) == "not run (the variant failed a gated metric first)"
    assert verdict_cell(r, "x/acc", True) == "–"
    assert stopped(variant({"c/acc": 90.0}, stopped=where)) is None   # nothing left unrun: nothing to say
    # a variant that could not pass stopped at no failed look: its row names no stop, its cells say why
    r = variant({"c/acc": 90.0, "s/rougeL": 30.0}, not_run={"s": "cannot pass"})
    assert stopped(r) is None and verdict_cell(r, "s/rougeL", True) == "not run (the variant could no longer pass)"
    # no record of why a task has no score: inconclusive, not measured (never "not run")
    r = variant({"c/acc": 90.0, "s/rougeL": 30.0})
    assert verdict_cell(r, "s/rougeL", True) == "inconclusive: not measured on this variant: no score in its result"
    # a verdict the second arithmetic does not give reads as page 1's: unstable, with its interval
    shaky = Row(r.facts, Evidence(), Judgement("inconclusive", {"c/acc": Verdict(
        "inconclusive", lo=-1.6, hi=1.44, unstable="pass", limit=3.0, n=964)}))
    assert verdict_cell(shaky, "c/acc", True) == "unstable [-1.60, +1.44]"

