"""benchmarks/stratified_reads.py: flips by stratum and the stratified design's standard error."""
from __future__ import annotations

import math

from benchmarks import stratified_reads as sr
from pipeline.domain.sets.sample_row import partial as sample


def row(doc, margin, right):
    """A choice item whose top choice leads by `margin` nats; pred is gold when `right`."""
    return sample(doc_id=doc, logliks=[-1.0, -1.0 - margin], pred=0 if right else 1, gold=0)


def test_flips_only_in_the_low_stratum_give_the_full_read_s_error_from_fewer_items():
    base = {i: row(i, 0.1 if i < 40 else 2.0, True) for i in range(200)}
    variant = [row(i, 0.1, i % 4 != 0 or i >= 40) for i in range(200)]        # 10 flips, all low-margin
    c = sr.compare(base, variant, below=0.5, rate=0.25)
    assert (c["n"], c["flips"], c["low_flips"], c["low"], c["reads"]) == (200, 10, 10, 40, 80)
    full = 100 * math.sqrt(sr.variance([-1.0] * 10 + [0.0] * 190) / 200)
    strat = 100 * math.sqrt((40 / 200) ** 2 * sr.variance([-1.0] * 10 + [0.0] * 30) / 40)
    assert abs(c["se_full"] - full) < 1e-9 and abs(c["se_strat"] - strat) < 1e-9
    assert 0.85 < c["se_strat"] / c["se_full"] <= 1.0           # the same error from 40% of the items


def test_flips_in_the_high_stratum_cost_the_stratified_design_error():
    base = {i: row(i, 0.1 if i < 40 else 2.0, True) for i in range(200)}
    variant = [row(i, 0.1, i % 10 != 0) for i in range(200)]                  # 20 flips, 16 high-margin
    c = sr.compare(base, variant, below=0.5, rate=0.25)
    assert c["low_flips"] == 4 and c["se_strat"] > 1.5 * c["se_full"]
