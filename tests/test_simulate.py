"""`python -m pipeline.scoring.simulation.simulate`: the error rates of the look-by-look verdicts, replayed on
zero-inflated, heavy-tailed, tied and Gaussian paired differences for each metric kind (0/100,
per-sample graded, corpus), and the same cases failing the procedure it replaced (delta -/+ z x SE)."""
from dataclasses import replace
import math

import numpy as np
import yaml
import pytest

from pipeline.domain.sets.sample_row import partial as row, write as write_jsonl
from pipeline.scoring.simulation import pick_across, replay, simulate
from pipeline.scoring.simulation.replay import Population, rates

LOOKS = [0.25, 0.5, 0.75, 1.0]
SIMS = 1000
ALPHA = 0.025


def _bound(sims=SIMS):
    return ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / sims)


def _graded(kind, rng, n=400):
    base = np.clip(rng.normal(30, 12, n), 0, 100)
    if kind == "zero_inflated_10x30":
        moved = rng.random(n) < 0.10
        return base, np.where(moved, np.clip(base - 30 + rng.normal(0, 5, n), 0, 100), base)
    if kind == "zero_inflated_5x60":
        base = np.where(rng.random(n) < 0.1, 70.0, base)
        moved = (rng.random(n) < 0.5) & (base >= 60)
        return base, np.where(moved, base - 60, base)
    if kind == "heavy_tailed":
        moved = rng.random(n) < 0.3
        return base, np.where(moved, np.clip(base + 4 * rng.standard_t(2, n), 0, 100), base)
    if kind == "tied":           # short outputs: ROUGE-L on a few words takes few values
        base = rng.choice([0.0, 25.0, 33.3, 50.0, 66.7, 100.0], n)
        return base, np.where(rng.random(n) < 0.2, rng.choice([0.0, 25.0, 50.0], n), base)
    return base, np.clip(base + rng.normal(-3, 3, n), 0, 100)                # gaussian


def _rate(rs, name):
    return next(r for r in rs if r.name == name)


@pytest.mark.parametrize("kind,cap", [("zero_inflated_10x30", 96), ("zero_inflated_10x30", 24),
                                      ("zero_inflated_5x60", 96), ("heavy_tailed", 96), ("tied", 96),
                                      ("gaussian", 96)])
def test_graded_false_pass_and_fail_stay_within_alpha(kind, cap):
    base, tier = _graded(kind, np.random.default_rng(7))
    rs = rates(Population.of(base, tier, "graded"), LOOKS, cap, 0.95, 3.0, SIMS, seed=1)
    assert _rate(rs, "false_pass").value <= _bound()
    assert _rate(rs, "false_fail").value <= _bound()


@pytest.mark.parametrize("kind,cap", [("zero_inflated_10x30", 96), ("zero_inflated_5x60", 96),
                                      ("zero_inflated_10x30", 24)])
def test_the_previous_procedure_fails_the_zero_inflated_cases(kind, cap):
    base, tier = _graded(kind, np.random.default_rng(7))
    rs = rates(Population.of(base, tier, "graded"), LOOKS, cap, 0.95, 3.0, SIMS, seed=1, method="wald")
    assert _rate(rs, "false_pass").value > 2 * _bound()


def test_identical_outputs_pass_at_a_large_cap_and_not_on_a_zero_width_interval_at_a_small_one():
    base, _ = _graded("gaussian", np.random.default_rng(8))
    pop = Population.of(base, base.copy(), "graded")
    big = rates(pop, LOOKS, 400, 0.95, 3.0, 600, seed=2)
    assert _rate(big, "power").value > 0.9 and _rate(big, "false_pass").value <= _bound(600)
    small = rates(pop, LOOKS, 24, 0.95, 3.0, 600, seed=2)
    assert _rate(small, "power").value < 0.5


@pytest.mark.parametrize("lost,gained", [(0.0, 0.0), (0.04, 0.01), (0.15, 0.12)])
def test_binary_false_pass_within_alpha(lost, gained):
    rng = np.random.default_rng(9)
    n = 2000
    u = rng.random(n)
    base = np.where(u < 0.5 + lost, 100.0, 0.0)
    tier = base.copy()
    tier[u < lost] = 0.0
    tier[(u >= 0.5 + lost) & (u < 0.5 + lost + gained)] = 100.0
    rs = rates(Population.of(base, tier, "binary"), LOOKS, 640, 0.95, 3.0, SIMS, seed=3)
    assert _rate(rs, "false_pass").value <= _bound() and _rate(rs, "false_fail").value <= _bound()


@pytest.mark.parametrize("share", [0.05, 0.3, 1.0])
def test_corpus_false_pass_within_alpha_and_wald_fails_when_few_change(share):
    rng = np.random.default_rng(10)
    n = 300
    changed = rng.random(n) < share
    pseudo = np.where(changed, rng.normal(-2.0, 15.0, n), 0.0)
    pop = Population.of(np.zeros(n), pseudo, kind="corpus", changed=changed)
    rs = rates(pop, LOOKS, 96, 0.95, 1.0, SIMS, seed=4)
    assert _rate(rs, "false_pass").value <= _bound()
    if share < 0.1:
        old = rates(pop, LOOKS, 96, 0.95, 1.0, SIMS, seed=4, method="wald")
        assert _rate(old, "false_pass").value > 2 * _bound()


def test_moving_keeps_zeros_and_reaches_the_target():
    base, tier = _graded("zero_inflated_10x30", np.random.default_rng(11))
    pop = Population.of(base, tier, "graded")
    at = replay.moved(pop, -3.0)
    assert at.diff.mean() == pytest.approx(-3.0, abs=1e-6)
    assert (at.diff == 0).sum() >= (pop.diff == 0).sum() - 5
    same = Population.of(base, base.copy(), "graded")
    worst = replay.moved(same, -3.0)
    assert worst.diff.mean() == pytest.approx(-3.0, abs=1e-6) and worst.changed.sum() > 0


def test_the_command_reads_results_files_and_params(tmp_path, capsys):
    rng = np.random.default_rng(12)
    base, tier = _graded("zero_inflated_10x30", rng, n=96)
    rows = lambda xs: [row(doc_id=i, scores={"rougeL": float(x)}) for i, x in enumerate(xs)]  # noqa: E731
    write_jsonl(tmp_path / "b.jsonl", rows(base))
    write_jsonl(tmp_path / "t.jsonl", rows(tier)[:48])          # a variant stopped at look 2
    simulate.main([str(tmp_path / "b.jsonl"), str(tmp_path / "t.jsonl"), "--metric", "summarization/rougeL",
                   "--sims", "300"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# summarization/rougeL: graded, 48 pairs")
    names = [line.split()[0] for line in out[1:]]
    assert names == ["false_pass", "false_fail", "power", "fail_power", "samples_at_margin"]
    assert all(" ± " in line for line in out[1:])


def test_the_command_replays_stratified_looks_beside_the_plain_ones(tmp_path, capsys):
    """--strata: the strata from the baseline's label margins (params.yaml's eval.sequential.strata), four
    procedures printed; without strata in the params, one line naming the key and exit 2."""
    rng = np.random.default_rng(3)
    margins = rng.exponential(0.6, 400)
    lost = (margins < 0.3) & (rng.random(400) < 0.1)
    base = [row(doc_id=i, gold=1, pred=1, logliks=[-1.0 - float(m), -1.0], scores={"acc": 100.0})
            for i, m in enumerate(margins)]
    tier = [replace(b, pred=0 if lost[i] else 1, scores={"acc": 0.0 if lost[i] else 100.0}) for i, b in enumerate(base)]
    write_jsonl(tmp_path / "b.jsonl", base)
    write_jsonl(tmp_path / "t.jsonl", tier)
    simulate.main([str(tmp_path / "b.jsonl"), str(tmp_path / "t.jsonl"), "--metric", "classification/acc",
                   "--strata", "--sims", "200"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("# strata: margin below 0.5 nats read whole")
    assert [line.split(":")[0] for line in out[2:]] == ["stratified, losses shape", "stratified, losses low",
                                                       "stratified, losses high", "unstratified"]
    params = yaml.safe_load(open("params.yaml"))
    del params["eval"]["sequential"]["strata"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(SystemExit) as e:
        simulate.main([str(tmp_path / "b.jsonl"), str(tmp_path / "t.jsonl"), "--metric", "classification/acc",
                       "--strata", "--params", str(tmp_path / "params.yaml")])
    assert e.value.code == 2 and "eval.sequential.strata is not set" in capsys.readouterr().err


def test_the_command_names_a_bad_metric(tmp_path, capsys):
    write_jsonl(tmp_path / "b.jsonl", [row(doc_id=0, scores={"rougeL": 1.0}), row(doc_id=1, scores={"rougeL": 2.0})])
    with pytest.raises(SystemExit) as e:
        simulate.main([str(tmp_path / "b.jsonl"), str(tmp_path / "b.jsonl"), "--metric", "nosuch/rougeL"])
    assert e.value.code == 2 and "nosuch" in capsys.readouterr().err


def test_reading_the_fixed_interval_at_every_look_would_not_keep_alpha():
    """What the looks' spending is for: the 95% interval read at each of 4 looks passes a tier at the
    margin more often than 2.5% (about 0.05), the spent critical values do not."""
    rng = np.random.default_rng(13)
    base = rng.uniform(20, 80, 2000)
    pop = replay.moved(Population.of(base, np.clip(base + rng.normal(0, 10, 2000), 0, 100), "graded"), -3.0)
    sizes, sims = [50, 100, 150, 200], 3000
    peek = replay.replay(pop, sizes, [0.95] * 4, 3.0, sims, 1, -3.0)["verdict"] == "pass"
    spent = rates(pop, LOOKS, 200, 0.95, 3.0, sims, seed=1)
    assert peek.mean() > _bound(sims) and _rate(spent, "false_pass").value <= _bound(sims)

def test_a_stratified_read_is_replayed_only_as_one(tmp_path, capsys):
    """A variant's rows read in strata hold the close calls at more than their share of the pool: the
    plain replay would simulate another population, so it says so in one line and exits 2."""
    base = [row(doc_id=i, gold=1, pred=1, logliks=[-1.0 - 0.1 * i, -1.0], scores={"acc": 100.0})
            for i in range(40)]
    tier = [replace(b, stratum=int(i >= 10), strata=[10, 30], scores={"acc": 0.0 if i < 3 else 100.0})
            for i, b in enumerate(base[:25])]
    write_jsonl(tmp_path / "b.jsonl", base)
    write_jsonl(tmp_path / "t.jsonl", tier)
    with pytest.raises(SystemExit) as e:
        simulate.main([str(tmp_path / "b.jsonl"), str(tmp_path / "t.jsonl"), "--metric", "classification/acc"])
    assert e.value.code == 2 and "a stratified read (25 of 40 items" in capsys.readouterr().err
    simulate.main([str(tmp_path / "b.jsonl"), str(tmp_path / "t.jsonl"), "--metric", "classification/acc",
                   "--strata", "--sims", "100"])
    assert "stratified, losses shape" in capsys.readouterr().out


@pytest.mark.parametrize("good", [0, 2])
def test_the_pick_across_models_is_false_at_most_one_verdict_s_alpha(good):
    """Eight candidates of several models in one fixed sequence (scoring/simulation/pick_across.py), the
    bad ones exactly at the margin: the fixed sequence's false picks stay within the stated rate, the
    smallest-passing rule's do not (so the test would fail if the pick walked past a non-pass)."""
    rng = np.random.default_rng(21)
    base = np.where(rng.random(1280) < 0.85, 100.0, 0.0)
    tier = np.where(rng.random(1280) < 0.04, 100.0 - base, base)
    sims = 1500
    found = {r.name: r.value for r in pick_across.rates(Population.of(base, tier, "binary"), [0.25, 0.5, 0.75, 1.0], 1280,
                                                          0.95, 3.0, 8, good, sims=sims)}
    bound = found["stated_rate"] + 2 * np.sqrt(0.025 * 0.975 / sims)
    assert found["false_pick_fixed_sequence"] <= bound
    assert found["false_pick_smallest_passing"] > 2 * bound
    seq, _ = pick_across.picks(np.array([[True, True], [True, False], [False, True]]))
    assert list(seq) == [1, 0]          # run 1: passes, passes, stops at 2; run 2: stops at 1
