"""One number per thing on the page: in decision.json every variant's score minus its baseline's is the
delta beside it, and that delta is its interval's; a read stopped at a look shows the estimate that
decided, not the plain mean of what it read. `inconsistencies` reads any decision.json."""
import json

import pytest

from pipeline import io, paths
from pipeline.stages import decide
from tests import result_files
from tests.test_decide import project, samples  # noqa: F401 - the fixture


def inconsistencies(data: dict) -> list[str]:
    """Every place in a decision.json where two numbers for one thing disagree."""
    found = []
    rows = data["rows"]
    bases = {(r["model"], r["backend"], r["compute_dtype"]): r for r in rows if r["overall"] == "baseline"}
    for r in rows:
        base = bases.get((r["model"], r["backend"], r["compute_dtype"]))
        if r["status"] != "ok" or base is None or base is r:
            continue
        for m, d in r["deltas"].items():
            if m in base["metrics"] and abs(r["metrics"][m] - base["metrics"][m] - d) > 1e-6:
                found.append(f"{r['tier']}-{r['kv']} {m}: score {r['metrics'][m]:.3f} - baseline "
                             f"{base['metrics'][m]:.3f} != delta {d:.3f}")
            iv = r["intervals"].get(m)
            if iv is not None and abs(iv["delta"] - d) > 1e-9:
                found.append(f"{r['tier']}-{r['kv']} {m}: interval's delta {iv['delta']:.3f} != delta {d:.3f}")
    return found


def test_a_read_stopped_at_a_look_shows_the_estimate_that_decided(project):
    # the baseline misses the last quarter; int8 stopped at look 1 having read the first half, all right
    base_dir, int8_dir = paths.eval_dir("m", "fp16", "auto"), paths.eval_dir("m", "int8", "auto")
    io.atomic_write_jsonl(base_dir / "samples/classification.jsonl", samples("classification", 200, lambda i: i < 150))
    io.atomic_write_jsonl(int8_dir / "samples/classification.jsonl", samples("classification", 100, lambda i: True))
    for folder, acc, looked in ((base_dir, 75.0, None), (int8_dir, 100.0, 100)):
        res = json.loads((folder / "result.json").read_text())
        res["metrics"]["classification/acc"] = acc
        if looked:
            res["looks"] = {"classification": {"cap": 200, "sizes": [100, 200], "looks": 1, "of": 2, "n": looked,
                                               "confidence": 0.995, "settled": {}}}
            res["num_samples"]["classification"] = looked
        io.atomic_write_json(folder / "result.json", res)
    decide.main()
    data = json.loads(open("results/decision.json").read())
    int8 = next(r for r in data["rows"] if (r["tier"], r["kv"]) == ("int8", "auto"))
    assert int8["deltas"]["classification/acc"] == 0.0          # on the 100 documents both read
    assert int8["metrics"]["classification/acc"] == 75.0 and int8["read_means"]["classification/acc"] == 100.0
    assert inconsistencies(data) == []
    md = open("results/decision.md").read()
    quality = md.split("#### classification", 1)[1]
    assert "| int8-auto | 75.0 (+0.0 [" in quality


def test_the_checker_finds_a_score_that_is_not_baseline_plus_delta(project):
    decide.main()
    data = json.loads(open("results/decision.json").read())
    assert inconsistencies(data) == []
    int8 = next(r for r in data["rows"] if (r["tier"], r["kv"]) == ("int8", "auto"))
    int8["metrics"]["classification/acc"] += 0.5
    assert inconsistencies(data) == ["int8-auto classification/acc: score 100.500 - baseline 100.000 != delta 0.000"]


def test_the_committed_run_speaks_with_one_voice(root):
    """results/decision.json as committed (README command 1's run)."""
    assert inconsistencies(json.loads((root / "results/decision.json").read_text())) == []


def test_decide_reads_a_verdict_from_the_interval_evaluate_settled_it_on(project):
    """acc settled at look 1 of 2 on 100 items; the task read on to look 2 (another metric was open).
    decide's verdict, interval, delta and score for acc are look 1's as evaluate recorded them, not a
    second computation over all 200 items at look 2's confidence."""
    folder = paths.eval_dir("m", "int8", "auto")
    res = json.loads((folder / "result.json").read_text())
    at = {"verdict": "pass", "look": 1, "n": 100, "delta": -0.5, "lo": -1.75, "hi": 0.25, "confidence": 0.995}
    res["looks"] = {"classification": {"cap": 200, "sizes": [100, 200], "looks": 2, "of": 2, "n": 200,
                                       "confidence": 0.96, "settled": {"acc": at}}}
    io.atomic_write_json(folder / "result.json", res)
    decide.main()
    data = json.loads(open("results/decision.json").read())
    int8 = next(r for r in data["rows"] if (r["tier"], r["kv"]) == ("int8", "auto"))
    iv, v = int8["intervals"]["classification/acc"], int8["verdicts"]["classification/acc"]
    assert (iv["delta"], iv["lo"], iv["hi"], iv["n"]) == (-0.5, -1.75, 0.25, 100)
    assert v["verdict"] == "pass" and v["confidence"] == 0.995 and "read at look 1 of 2, 100 of 200 samples" in v["why"]
    assert int8["deltas"]["classification/acc"] == -0.5 and inconsistencies(data) == []


# fp16-fp8's classification read in two looks of 100 in a look order that is not doc_id order (the odd
# documents first); acc failed at look 1 in the run's arithmetic, and the task read on to look 2 because
# the second arithmetic settled it only there (int4-awq-fp8 on the default run)
ORDER = [d for d in range(200) if d % 2] + [d for d in range(200) if not d % 2]
FIRST = {"verdict": "fail", "look": 1, "n": 100, "delta": -10.0, "lo": -16.0, "hi": -5.0, "confidence": 0.995}
SECOND = {"verdict": "fail", "look": 2, "n": 200, "delta": -12.0, "lo": -16.5, "hi": -7.5, "confidence": 0.96}


def right(i):
    """Wrong on 10 of look 1's documents (i % 20 == 1) and on 50 documents only look 2 read."""
    return not (i % 20 == 1 or i % 4 == 0)


def read_in_two_looks(order=True):
    """fp16-fp8's result and samples as evaluate writes them (tests/result_files.py, the real parser)."""
    folder = paths.eval_dir("m", "fp16", "fp8")
    rows = samples("classification", 200, right)
    for r in rows:
        r["tied"] = r["doc_id"] % 8 == 0            # ties only among the documents look 2 read
    io.atomic_write_jsonl(folder / "samples/classification.jsonl", rows)
    res = json.loads((folder / "result.json").read_text())
    looks = {"cap": 200, "sizes": [100, 200], "looks": 2, "of": 2, "n": 200, "confidence": 0.96,
             "settled": {"acc": SECOND}, "first": {"acc": FIRST}, "second": {"acc": SECOND}, "unstable": []}
    res["looks"] = {"classification": {**looks, **({"order": ORDER} if order else {})}}
    res["arithmetic_check"] = {"status": "checked", "arithmetic": "bf16-operands: test",
                               "metrics": {"classification/acc": {"first": "fail", "second": "fail", "status": "stable"}}}
    io.atomic_write_json(folder / "result.json", result_files.variant(**{k: v for k, v in res.items()
                                                                        if k not in ("schema_version", "kind")}))


def test_the_numbers_beside_a_verdict_come_from_the_pairs_it_was_read_on(project):
    read_in_two_looks()
    decide.main()
    data = json.loads(open("results/decision.json").read())
    row = next(r for r in data["rows"] if (r["tier"], r["kv"]) == ("fp16", "fp8"))
    assert row["verdicts"]["classification/acc"]["verdict"] == "fail"
    assert row["intervals"]["classification/acc"]["n"] == 100 and row["deltas"]["classification/acc"] == -10.0
    # the flips and ties of look 1's 100 documents, not of the 200 the task read
    assert row["flips"]["classification"] == {"right_to_wrong": 10, "wrong_to_right": 0, "n": 100}
    assert row["ties"]["classification"] == {"tied": 0, "n": 100}
    md = open("results/decision.md").read()
    assert "| fp16-fp8 | 90.0 (-10.0 [-16.0, -5.0], **FAIL**) | 10/0 | 0 of 100 |" in md
    assert "| fp16 | fp8 | FAIL | " in md and " 10.0% |" in md.split("## Every variant")[0]
    # the deltas by length of the same 100 (prompt_chars 100 + 10 i: 15 / 20 / 65 odd documents a bucket,
    # 2 / 2 / 6 of them wrong)
    kv = md.split("### KV-cache quantization by input length", 1)[1]
    assert "| fp16-fp8 | fp16-auto | classification | 0-400: n=15, -13.33; 400-800: n=20, -10.00; 800-∞: n=65, -9.23 |" in kv
    # the regressions ranked among them: doc 0 flipped too, but only look 2 read it
    reg = open("results/regressions/m-fp16-fp8.md").read().split("## classification", 1)[1].split("\n## ", 1)[0]
    assert "Ranked over the 100 sample pairs its verdict was read on." in reg
    assert [line.split()[2] for line in reg.splitlines() if line.startswith("### doc")] == ["1", "21", "41", "61", "81"]
    # decision.json names the arithmetic of each settled record: the later look's is the second's
    looks = row["looks"]["classification"]
    assert looks["settled"]["acc"]["arithmetic"] == "second" and looks["settled"]["acc"]["delta"] == -12.0
    assert looks["first"]["acc"]["delta"] == -10.0 and "order" not in looks
    assert inconsistencies(data) == []


def test_a_result_without_the_look_order_labels_its_numbers_with_their_own_n(project):
    read_in_two_looks(order=False)
    decide.main()
    md = open("results/decision.md").read()
    assert "| fp16-fp8 | 90.0 (-10.0 [-16.0, -5.0], **FAIL**) | 60/0 (n=200) | 25 of 200 |" in md
    assert " 30.0% (n=200) |" in md.split("## Every variant")[0]
    reg = open("results/regressions/m-fp16-fp8.md").read()
    assert "Ranked over the 200 sample pairs read (its verdict was read on 100: this result.json records no look order)." in reg
