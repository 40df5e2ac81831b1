"""The second arithmetic's four states (contract.CHECK_STATES), each taken through decide on
synthetic results (tests/test_decide.py's project): skipped and impossible verdicts stand on the run's
arithmetic with a caveat on page 1 and the pick made as usual; not needed leaves a settled verdict
unchecked; checked settles what both arithmetics give. A status outside the four is refused on read."""
import json

import pytest

from pipeline import io, paths
from pipeline.domain.result import contract
from pipeline.evaluation import second_arithmetic
from pipeline.stages import decide
from tests import result_files
from tests.test_decide import project  # noqa: F401 - the fixture

VARIANTS = [("fp16", "fp8"), ("int8", "auto"), ("int4-gptq", "auto"), ("int4-gptq", "fp8"),
            ("nf4-bnb", "auto"), ("nf4-bnb", "fp8")]


def _set_check(records: dict) -> None:
    """(tier, kv) -> the arithmetic_check record evaluate would have written."""
    for (tier, kv), rec in records.items():
        f = paths.eval_dir("m", tier, kv) / "result.json"
        res = json.loads(f.read_text())
        res["arithmetic_check"] = rec
        io.atomic_write_json(f, res)


def _decide() -> tuple[dict, str]:
    decide.main()
    return json.loads(open("results/decision.json").read()), open("results/decision.md").read()


def _verdict(data, tier, kv, metric="classification/acc"):
    row = next(r for r in data["rows"] if (r["tier"], r["kv"]) == (tier, kv))
    return row["verdicts"][metric]


@pytest.mark.parametrize("status,why", [(contract.SKIPPED, "eval.noise_floor is false"),
                                        (contract.IMPOSSIBLE, "stage noise failed (a test's reason)")])
def test_skipped_or_impossible_verdicts_rest_on_one_arithmetic_and_the_pick_is_made(project, status, why):
    _set_check({v: {"status": status, "why": why} for v in VARIANTS})
    data, md = _decide()
    v = _verdict(data, "int8", "auto")
    assert v["verdict"] == "pass" and not v.get("unchecked")
    assert data["recommended"]["m"]["tier"] != "fp16"          # not the baseline: the pick is made as usual
    page_one = md.split("## The run", 1)[0]
    assert "the verdicts rest on the run's arithmetic alone" in page_one and f"{status}: {why}" in page_one


def test_not_needed_leaves_a_settled_verdict_unchecked_and_the_sequence_stops_there(project):
    _set_check({("int8", "auto"): {"status": contract.NOT_NEEDED, "why": "the variant cannot pass"},
                ("fp16", "fp8"): {"status": contract.SKIPPED, "why": "eval.noise_floor is false"}})
    data, md = _decide()
    v = _verdict(data, "int8", "auto")
    assert v["verdict"] == "inconclusive" and v["unchecked"] == "pass"
    assert (data["recommended"]["m"]["tier"], data["recommended"]["m"]["kv"]) == ("fp16", "fp8")
    assert "unchecked verdicts (inconclusive) on int8-auto" in md.split("## The run", 1)[0]


def test_checked_settles_what_both_arithmetics_give(project):
    both = {"classification/acc": {"first": "pass", "second": "pass", "status": "stable"}}
    _set_check({("int8", "auto"): {"status": contract.CHECKED, "arithmetic": "bf16-operands: test",
                                   "metrics": both}})
    data, md = _decide()
    v = _verdict(data, "int8", "auto")
    assert v["verdict"] == "pass" and v["second_arithmetic"] == "pass"
    assert "the verdicts rest on the run's arithmetic alone" not in md


def test_a_status_outside_the_four_is_refused_naming_the_field():
    res = result_files.variant(tier="int8", arithmetic_check={"status": "checked"})
    res["arithmetic_check"]["status"] = "ok"              # the old word, or a typo
    with pytest.raises(contract.ResultError, match="arithmetic_check.status 'ok' is not one of"):
        contract.parse(res, "results/m/int8-auto/result.json")


@pytest.mark.parametrize("noise,state", [("off", contract.SKIPPED), ("failed", contract.IMPOSSIBLE),
                                         ("unsupported", contract.IMPOSSIBLE)])
def test_evaluate_reads_the_state_from_stage_noise(tmp_path, monkeypatch, noise, state):
    monkeypatch.chdir(tmp_path)
    io.atomic_write_json(paths.noise_dir("m") / paths.RESULT_FILE, result_files.noise(noise))
    got = second_arithmetic.baseline_second(None, "m")
    assert isinstance(got, second_arithmetic.NoCheck) and got.status == state
    result = {}
    assert second_arithmetic.second(None, None, [], got, None, result) is None
    assert result["arithmetic_check"]["status"] == state and contract.problems(
        result_files.variant(tier="int8", arithmetic_check=result["arithmetic_check"])) == []
