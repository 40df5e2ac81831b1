import json

import pytest

from pipeline import backend_diff
from pipeline.domain.sets import sample_row
from tests import result_files
from pipeline.domain.sets.sample_row import partial as row

CONFIDENCE = 0.95


def write_run(root, variant, status="ok", preds=(1, 0, 1, 1), backend="reference", reason=None, gold=(1, 0, 1, 0),
              cpu=None, serving=None):
    d = root / "evals" / "m" / variant
    (d / "samples").mkdir(parents=True)
    acc = [100.0 * (p == g) for p, g in zip(preds, gold)]
    tier, kv = variant.rsplit("-", 1)
    if status == "ok":
        result = result_files.variant(tier=tier, kv=kv, backend=backend, serving=serving or {},
                                      metrics={"classification/acc": sum(acc) / len(acc)},
                                      measured_on={"cpu": {"model": cpu, "isa": ["avx2"], "cores": 2},
                                                   "engine": {"name": backend}} if cpu else None)
    else:
        result = result_files.variant(status, tier=tier, kv=kv, backend=backend, reason=reason)
    (d / "result.json").write_text(json.dumps(result))
    if status == "ok":
        rows = [row(doc_id=i, gold=g, pred=p, scores={"acc": a}, output="", target="")
                for i, (g, p, a) in enumerate(zip(gold, preds, acc))]
        sample_row.write(d / "samples" / "classification.jsonl", rows)


def test_identical_differs_missing_and_unsupported(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a, "fp16-auto")
    write_run(b, "fp16-auto", backend="vllm")
    write_run(a, "int8-auto", preds=(1, 0, 1, 1) * 10, gold=(1, 0, 1, 0) * 10)      # 3 of 4 lost, of 40
    write_run(b, "int8-auto", preds=(0, 1, 0, 1) * 10, gold=(1, 0, 1, 0) * 10, backend="vllm")
    write_run(a, "int4-auto")
    write_run(b, "int4-auto", status="unsupported", reason="cpu_gemm_wna16 | not implemented\nmore")
    write_run(a, "fp8-auto")
    rows = {v: (note, ivs) for _, v, note, ivs in backend_diff.compare_dirs(a, b, CONFIDENCE)}
    assert rows["fp16-auto"][0] == "A reference, B vllm"
    assert backend_diff.verdict(rows["fp16-auto"][1]["classification/acc"]) == "identical"
    iv = rows["int8-auto"][1]["classification/acc"]
    assert iv.delta == pytest.approx(-75.0) and iv.hi < 0 and backend_diff.verdict(iv) == "differs"
    assert rows["int4-auto"] == ("A ok, B unsupported: cpu_gemm_wna16 / not implemented", {})
    assert rows["fp8-auto"] == ("only in A", {})
    md = backend_diff.render(list(backend_diff.compare_dirs(a, b, CONFIDENCE)), "run A", "run B", CONFIDENCE)
    assert "| m | int8-auto | A reference, B vllm | -75.00 [" in md


def test_the_title_describes_each_run_from_its_results_never_its_folder(tmp_path, monkeypatch, capsys, in_repo):
    a, b = tmp_path / "somewhere-a", tmp_path / "somewhere-b"
    write_run(a, "fp16-auto", cpu="AMD EPYC")
    write_run(b, "fp16-auto", backend="vllm", cpu="Intel Xeon")
    backend_diff.main([str(a), str(b)])
    title = capsys.readouterr().out.splitlines()[0]
    assert title == ("# Backend comparison: B (vllm on Intel Xeon (avx2)) minus A (reference on AMD EPYC (avx2))")
    assert str(tmp_path) not in title
    backend_diff.main([str(a), str(b), "--label-a", "old", "--label-b", "new"])
    assert capsys.readouterr().out.splitlines()[0] == "# Backend comparison: B (new) minus A (old)"


def test_runs_at_different_limits_compare_on_the_samples_both_scored(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a, "fp16-auto", preds=(1, 0), gold=(1, 0))                 # 2 samples, both right
    write_run(b, "fp16-auto", preds=(1, 1, 1, 1), gold=(1, 0, 1, 0))     # 4 samples: doc 1 now wrong
    iv = backend_diff.diff(backend_diff.load_run(a / "evals/m/fp16-auto"), backend_diff.load_run(b / "evals/m/fp16-auto"),
                           CONFIDENCE)["classification/acc"]
    assert iv.n == 2 and iv.delta == pytest.approx(-50.0)


def test_cli_rejects_a_dir_without_evals(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        backend_diff.main([str(tmp_path), str(tmp_path)])
    assert e.value.code == 2 and "no evals/ folder" in capsys.readouterr().err


def test_cli_names_a_result_of_another_version_in_one_line(tmp_path, capsys, in_repo):
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a, "fp16-auto")
    write_run(b, "fp16-auto")
    old = b / "evals/m/fp16-auto/result.json"
    old.write_text(json.dumps({**json.loads(old.read_text()), "schema_version": 1}))
    with pytest.raises(SystemExit) as e:
        backend_diff.main([str(a), str(b)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "schema_version 1 (this qtier reads" in err


def test_a_difference_in_how_the_fp8_cache_rounds_is_said_beside_the_row(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a, "int8-fp8", serving={"kv_cache": "fp8_e4m3 simulated (K/V rounded through float8_e4m3fn, 1.0)"})
    write_run(b, "int8-fp8", backend="vllm", serving={"kv_cache": "fp8_e4m3", "kv_write": {"rounding": "truncation"}})
    write_run(a, "int8-auto", serving={"kv_cache": "auto"})
    write_run(b, "int8-auto", backend="vllm", serving={"kv_cache": "auto"})
    rows = {v: note for _, v, note, _ in backend_diff.compare_dirs(a, b, CONFIDENCE)}
    assert rows["int8-fp8"] == "A reference, B vllm; fp8 K/V rounded: A nearest, B truncation"
    assert rows["int8-auto"] == "A reference, B vllm"


def test_a_graded_metric_no_sample_of_which_changed_is_identical_whatever_its_interval_s_floor():
    from pipeline.scoring.estimators import paired_graded
    from pipeline.scoring.estimators.stats import Interval

    same = paired_graded.summary([0.0] * 10, base=[50.0] * 10)
    assert backend_diff.verdict(Interval(0.0, -2.8, 3.7, 10, graded=same)) == "identical"
    moved = paired_graded.summary([0.0] * 9 + [-5.0], base=[50.0] * 10)
    assert backend_diff.verdict(Interval(-0.5, -2.8, 3.7, 10, graded=moved)) == "within noise"
