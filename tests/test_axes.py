"""The pick on two axes (pipeline/scoring/pick/axes.py) on judged rows: a failing KV format stops the KV
chain alone, a combination is a candidate only when both its parts are claimed, and the pick is the
smallest in memory of the chains' picks.

    .venv/bin/python -m pytest -n 0 -q tests/test_axes.py
"""
import dataclasses

import pytest

from pipeline.scoring.pick import recommend
from pipeline.scoring.pick.axes import COMBINATIONS, KV, PARTS_REASON, REPAIRED, WEIGHTS, axes
from pipeline.scoring.pick.sequence import run_length
from pipeline.scoring.pick.walk import walk
from tests.test_decision import iv, judged, row

pytestmark = pytest.mark.unit

GOOD, BAD = iv(0.0), iv(-10.0)


def grid(verdicts):
    """fp16 (1000 B), int8 (500 B), int4 (250 B) x KV auto (10 B/token), fp8 (5), int4kv (2)."""
    facts = [row(t, kv=k, w=w, kvb=b, acc=90.0) for t, w in (("fp16", 1000), ("int8", 500), ("int4", 250))
             for k, b in (("auto", 10), ("fp8", 5), ("int4kv", 2))]
    return judged(facts, {v: {"acc": ok} for v, ok in verdicts.items()})


def test_a_failing_kv_format_does_not_block_the_weight_tiers():
    rows = grid({"fp16-fp8": BAD, "fp16-int4kv": BAD, "int8-auto": GOOD, "int4-auto": GOOD,
                 "int8-fp8": GOOD, "int4-fp8": GOOD, "int8-int4kv": GOOD, "int4-int4kv": GOOD})
    a = axes(rows, "m", "fp16", "auto")
    assert [r.variant for r in a.weights.passes] == ["int8-auto", "int4-auto"]
    assert a.kv.run == 0 and a.kv.stopper.variant == "fp16-fp8"
    # every combination uses a KV format the KV chain does not claim: held, whatever its own verdict
    assert a.combinations.run == 0 and a.combinations.stop_reason == PARTS_REASON
    assert a.pick.variant == "int4-auto" and [n for n, _ in a.chains] == [WEIGHTS, KV, COMBINATIONS]
    # today's one sequence over every candidate stops at the failing format and keeps the baseline
    assert walk(rows, "m").pick is None
    rec = recommend.explain_axes(a, 0.025)
    assert rec.row is a.pick and "3 fixed sequences at 2.5% each" in rec.why and "at most 7.5%" in rec.why


def test_a_combination_needs_both_parts_and_its_own_pass():
    # int8 and fp8 each non-inferior alone, int8 + fp8 inferior: the combination's own verdict stops it
    rows = grid({"fp16-fp8": GOOD, "fp16-int4kv": BAD, "int8-auto": GOOD, "int4-auto": BAD,
                 "int8-fp8": BAD, "int8-int4kv": GOOD, "int4-fp8": GOOD, "int4-int4kv": GOOD})
    a = axes(rows, "m", "fp16", "auto")
    assert (a.weights.run, a.kv.run) == (1, 1)
    assert [r.variant for r in a.combinations.sequence] == ["int8-fp8", "int8-int4kv", "int4-fp8", "int4-int4kv"]
    assert a.combinations.run == 0 and a.combinations.stop_reason == "fail"
    assert a.pick.variant == "int8-auto"       # int8 (500 B) before fp16-fp8 (1000 B) in memory
    # the same combination passing is the pick: smaller than both its parts
    rows = grid({"fp16-fp8": GOOD, "int8-auto": GOOD, "int8-fp8": GOOD, "int8-int4kv": GOOD})
    a = axes(rows, "m", "fp16", "auto")
    assert a.combinations.pick.variant == "int8-fp8" and a.pick.variant == "int8-fp8"
    assert a.combinations.stop_reason in ("inconclusive", PARTS_REASON)
    assert run_length([r.judgement.overall == "pass" for r in a.combinations.sequence]) >= 1


def test_a_gpu_filter_leaves_the_gate_to_the_parts_verdicts():
    rows = grid({"fp16-fp8": GOOD, "int8-auto": GOOD, "int8-fp8": GOOD})
    every = {(r.facts.tier, r.facts.kv) for r in rows}
    # a GPU that cannot serve int8 + KV auto (say, its memory plan) still opens int8 + fp8: int8 is claimed
    a = axes(rows, "m", "fp16", "auto", allowed=every - {("int8", "auto")})
    assert a.weights.run == 0 and a.combinations.pick.variant == "int8-fp8" and a.pick.variant == "int8-fp8"


def test_one_kv_mode_is_one_chain_and_its_statement_is_one_verdicts():
    rows = judged([row("fp16", w=1000, acc=90.0), row("int8", w=500, acc=90.0)], {"int8-auto": {"acc": GOOD}})
    a = axes(rows, "m", "fp16", "auto")
    assert [n for n, _ in a.chains] == [WEIGHTS] and a.stated_error(0.025) == 0.025
    assert "one fixed sequence at 2.5%, so the pick is worse than a margin at most 2.5%" in \
        recommend.explain_axes(a, 0.025).why


def test_a_failing_repair_does_not_stop_the_formats_that_need_none():
    # nvfp4 kept 21 of 30 layers (18 B/token) sorts before fp8 (5) in memory: on one KV chain its FAIL
    # would stop fp8; on its own chain it stops only itself and the combinations that use it
    facts = [row(t, kv=k, w=w, kvb=b, acc=90.0) for t, w in (("fp16", 1000), ("int8", 500))
             for k, b in (("auto", 10), ("fp8", 5))]
    facts += [dataclasses.replace(row(t, kv="nvfp4-rep", w=w, kvb=8, acc=90.0), kv_repair={"kept": [1, 19]})
              for t, w in (("fp16", 1000), ("int8", 500))]
    rows = judged(facts, {"fp16-fp8": {"acc": GOOD}, "fp16-nvfp4-rep": {"acc": BAD}, "int8-auto": {"acc": GOOD},
                          "int8-fp8": {"acc": GOOD}, "int8-nvfp4-rep": {"acc": GOOD}})
    a = axes(rows, "m", "fp16", "auto")
    assert [n for n, _ in a.chains] == [WEIGHTS, KV, REPAIRED, COMBINATIONS]
    assert [r.variant for r in a.kv.passes] == ["fp16-fp8"] and a.repaired.stopper.variant == "fp16-nvfp4-rep"
    assert [r.variant for r in a.combinations.sequence] == ["int8-nvfp4-rep", "int8-fp8"]
    # int8 + the failed repair is held (its KV part is not claimed), so the combinations claim nothing;
    # the pick is the smaller of the weights chain's (int8-auto) and the KV chain's (fp16-fp8)
    assert a.combinations.stop_reason == PARTS_REASON and a.pick.variant == "int8-auto"
    rec = recommend.explain_axes(a, 0.025)
    assert "4 fixed sequences at 2.5% each" in rec.why and "at most 10.0%" in rec.why
    # with no repaired mode, three chains as before
    assert axes([r for r in rows if "rep" not in r.variant], "m", "fp16", "auto").repaired is None
