"""result.json's contract (pipeline/domain/result/contract.py): versioned, typed, and loud when partial."""
import json
import re

import pytest

from pipeline.domain.result import contract
from tests import result_files


def write(tmp_path, data):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    return path


def test_a_complete_result_loads_typed(tmp_path):
    looks = {"c": {"cap": 16, "sizes": [8, 16], "looks": 1, "of": 2, "n": 8, "confidence": 0.99,
                   "settled": {"acc": {"verdict": "fail", "look": 1, "n": 8, "delta": -9.0, "lo": -12.0,
                                       "hi": -6.0, "confidence": 0.99}}}}
    check = {"status": "checked", "arithmetic": "float32", "seconds": 1.5,
             "metrics": {"c/acc": {"first": "fail", "second": "fail", "status": "stable"}},
             "sample_cache": {"cached": 0, "computed": 8, "tasks": {"c": {"computed": 8, "seconds": 2.0}}}}
    res = contract.load(write(tmp_path, result_files.variant(metrics={"c/acc": 90.0}, looks=looks,
                                                                arithmetic_check=check)))
    assert res.status == "ok" and res.metrics == {"c/acc": 90.0} and res.looks["c"].n == 8
    assert res.looks["c"].settled["acc"].verdict == "fail" and res.looks["c"].reach() == (16, 16)
    assert res.arithmetic_check.metrics["c/acc"].status == "stable"
    assert res.arithmetic_check.sample_cache.tasks["c"].seconds == 2.0
    assert res.not_run == {} and res.stopped is None and res.serving.backend == "reference"


@pytest.mark.parametrize("drop", ["metrics", "seconds", "tier", "num_samples"])
def test_a_missing_field_is_named_with_the_file(tmp_path, drop):
    data = result_files.variant()
    del data[drop]
    with pytest.raises(contract.ResultError, match=rf"result\.json: missing field '{drop}' \(status ok\)"):
        contract.load(write(tmp_path, data))


def test_an_older_version_an_unknown_field_and_a_missing_file_are_refused(tmp_path):
    with pytest.raises(contract.ResultError, match="schema_version None"):
        contract.load(write(tmp_path, {"status": "ok", "metrics": {}}))
    with pytest.raises(contract.ResultError, match="unknown field 'metrcs'"):
        contract.load(write(tmp_path, {**result_files.variant(), "metrcs": {}}))
    with pytest.raises(contract.ResultError, match="missing"):
        contract.load(tmp_path / "none.json")


def test_a_result_that_did_not_run_needs_only_its_reason(tmp_path):
    res = contract.load(write(tmp_path, result_files.variant("unsupported", reason="no AVX-512")))
    assert res.reason == "no AVX-512" and res.metrics == {}
    with pytest.raises(contract.ResultError, match="missing field 'reason'"):
        contract.load(write(tmp_path, {k: v for k, v in result_files.variant("failed").items() if k != "reason"}))


def test_a_variant_the_time_budget_cut_before_look_1_is_not_measured_with_its_reason(tmp_path):
    why = "the time budget ended before its first look: lm-eval did not finish in the 174 s left"
    res = contract.load(write(tmp_path, result_files.variant(contract.NOT_MEASURED, reason=why)))
    assert (res.status, res.reason) == ("not measured", why)
    with pytest.raises(contract.ResultError, match="missing field 'reason' \\(status not measured\\)"):
        contract.load(write(tmp_path, {k: v for k, v in result_files.variant("not measured").items()
                                          if k != "reason"}))
    with pytest.raises(contract.ResultError, match="status 'not measured' is not one of"):
        contract.load(write(tmp_path, {**result_files.variant("not measured", reason=why), "kind": "noise"}))


def test_the_writer_cannot_write_what_the_reader_refuses():
    with pytest.raises(ValueError, match="missing field 'metrics'"):
        contract.stamp({k: v for k, v in result_files.variant().items() if k != "metrics"}, "variant")
    assert contract.stamp({"model": "m", "status": "off", "seconds": 0.0, "reason": "off"}, "noise")["kind"] == "noise"


def test_a_null_mapping_reads_as_empty(tmp_path):
    res = contract.load(write(tmp_path, result_files.variant(looks=None, serving=None)))
    assert res.looks == {} and res.serving is None


SERVED = {"backend": "vllm", "device": "cpu", "kv_cache_tokens": 2048, "engine": {"dtype": "bfloat16"},
          "decode_probe": {"tokens": 32, "tokens_per_s": 9.5}, "kernels": ["CPU W8A8"]}
LONG = {"status": "ok", "texts": 1, "edges": [0, 2], "buckets": [{"lo": 0, "hi": 2, "n_texts": 1, "n_positions": 2,
                                                                 "reach": 2, "kl_mean": 0.01, "kl_ci": [0.0, 0.02]}],
        "per_text": {"kl": [[0.01]], "top1": [[None]]}}


def test_every_record_reads_typed(tmp_path):
    on = {"cpu": {"model": "AMD EPYC", "isa": ["avx2"], "cores": 2}, "accelerator": None, "torch_threads": 2,
          "engine": {"name": "vllm", "version": "0.32.0"}}
    res = contract.load(write(tmp_path, result_files.variant(
        serving=SERVED, measured_on=on, long_context=LONG, tokenizer_check={"findings": ["x"], "overridden": True},
        throughput={"bench": {"1": {"median_tpot_ms": 40}}, "slo": {"slo": {"ttft_ms": 1, "tpot_ms": 2, "percentile": 99},
                                                                   "probes": [{"concurrency": 1, "meets": True}]}},
        fidelity={"status": "failed", "why": "oom"}, reused={"fidelity": "2026-12-07T09:59:31Z"})))
    assert res.serving.engine.dtype == "bfloat16" and res.serving.decode_probe.tokens_per_s == 9.5
    assert res.measured_on.cpu.isa == ["avx2"] and res.measured_on.engine.version == "0.32.0"
    assert res.long_context.measured and res.long_context.buckets[0].kl_ci == [0.0, 0.02]
    assert res.long_context.per_text.top1 == [[None]] and res.tokenizer_check.overridden
    assert res.throughput.bench["1"]["median_tpot_ms"] == 40.0 and res.throughput.slo.probes[0]["meets"] is True
    assert res.fidelity.why == "oom" and res.reused == {"fidelity": "2026-12-07T09:59:31Z"}


@pytest.mark.parametrize("field, value, said", [
    ("serving", {**SERVED, "kv_cache_tokens": "many"}, r"result\.serving\.kv_cache_tokens: expected an integer, got 'many'"),
    ("serving", {**SERVED, "kv_cahce_tokens": 1}, r"serving\.kv_cahce_tokens: unknown key \(did you mean 'kv_cache_tokens'\?\)"),
    ("serving", {"backend": "vllm"}, r"serving\.device: required key is missing"),
    ("long_context", {**LONG, "buckets": [{"lo": 0}]}, r"long_context\.buckets\[0\]\.hi: required key is missing"),
    ("measured_on", {"cpu": {"model": "x", "isa": "avx2"}, "engine": {"name": "reference"}},
     r"measured_on\.cpu\.isa: expected a list, got 'avx2'"),
    ("reused", {"fidelity": 3}, r"reused\.fidelity: expected a string, got 3"),
])
def test_a_record_of_the_wrong_shape_is_named_on_read_and_on_write(tmp_path, field, value, said):
    with pytest.raises(ValueError, match=said):
        result_files.variant(**{field: value})
    data = {**result_files.variant(), field: value}
    with pytest.raises(contract.ResultError, match=said):
        contract.load(write(tmp_path, data))


def test_a_task_not_run_says_one_of_the_known_reasons(tmp_path):
    ok = contract.load(write(tmp_path, result_files.variant(not_run={"r": "time budget", "g": "the variant failed"})))
    assert ok.not_run == {"r": "time budget", "g": "the variant failed"}
    # version 1 wrote {"tasks": [...], "why": ...}: not this contract, and said so
    with pytest.raises(contract.ResultError, match=r"not_run\['tasks'\] is \['r'\], not one of"):
        contract.load(write(tmp_path, {**result_files.variant(), "not_run": {"tasks": ["r"]}}))


@pytest.mark.parametrize("field, bad, named", [
    ("looks", {"c": {"looks": 1, "n": 8}}, "looks.c.cap: required key is missing"),
    ("looks", {"c": {"cap": 8, "looks": 1, "n": 8, "settle": {}}}, "looks.c.settle: unknown key (did you mean 'settled'?)"),
    ("looks", {"c": {"cap": 8, "looks": 1, "n": "8"}}, "looks.c.n: expected an integer, got '8'"),
    ("arithmetic_check", {"status": "checked", "metrics": {"c/acc": {"first": "pass"}}},
     "arithmetic_check.metrics.c/acc.second: required key is missing")])
def test_a_record_of_the_wrong_shape_is_refused_naming_its_key(tmp_path, field, bad, named):
    data = result_files.variant()
    data[field] = bad
    with pytest.raises(contract.ResultError, match=re.escape(named)):
        contract.load(write(tmp_path, data))
