"""Stratified looks (pipeline/scoring/estimators/strata.py, replay_strata.py): the design's arithmetic, and its error
rates simulated on zero-inflated choice items, with and without the variance floor."""
import numpy as np
import pytest

from pipeline.scoring.estimators import paired_binary, stats, strata
from pipeline.scoring.simulation import replay_strata


def test_label_margin_and_strata():
    assert strata.label_margin([-1.0, -1.25]) == pytest.approx(0.25)
    assert strata.label_margin([-3.0, -1.0, -2.5]) == pytest.approx(1.5)
    assert strata.label_margin([-2.0, -2.0]) == 0.0
    assert list(strata.assign([0.1, 0.5, 2.0, 0.49], 0.5)) == [0, 1, 1, 0]


def test_each_look_reads_its_share_of_each_stratum_in_the_seeded_order():
    reads = strata.stratum_reads([6, 8], 0.5, [0.5, 1.0])
    assert reads == [[3, 2], [6, 4]]
    assert strata.stratum_reads([4, 0], 0.25, [0.25, 1.0]) == [[1, 0], [4, 0]]
    order = [9, 1, 4, 7, 2, 0, 3, 5]
    stratum = {9: 1, 1: 0, 4: 1, 7: 0, 2: 1, 0: 0, 3: 1, 5: 1}
    out = strata.look_order(order, stratum, [[2, 1], [3, 3]])
    assert out == [1, 7, 9, 0, 4, 2]        # look 1: two of stratum 0, one of 1; look 2: the rest of each


def test_a_full_read_is_the_unstratified_interval():
    b, c, n = strata.effective([30, 2], [10, 1], [600, 680], [600, 680])
    assert (b, c, n) == pytest.approx((32.0, 11.0, 1280.0))
    whole = stats.stratified_binary(np.array([-100.0] * 32 + [100.0] * 11 + [0.0] * 1237),
                                    np.array([0] * 30 + [1] * 2 + [0] * 10 + [1] * 1 + [0] * 560 + [1] * 677),
                                    [600, 680], 0.95)
    assert whole.effective_n is None and whole.discordant == (32, 11) and whole.n == 1280


def test_a_partial_read_weights_the_strata_and_floors_a_silent_one():
    # the low stratum read whole, the high one at a quarter with no flip: the delta is the low stratum's
    # losses over the whole pool, and the floor keeps the high stratum's variance above zero
    b, c, n = strata.effective([40, 0], [0, 0], [640, 160], [640, 640])
    assert float((c - b) / n) == pytest.approx(-40 / 1280)
    assert 800 < float(n) < 1280
    no_floor = strata.effective([40, 0], [0, 0], [640, 160], [640, 640], floor=0.0)
    assert float(no_floor[2]) > float(n)
    lo, hi = paired_binary.interval(b, c, n, 0.95)
    lo0, hi0 = paired_binary.interval(40, 0, 1280, 0.95)
    assert lo < lo0                                      # the unread items cost some width


def items(lost_low, gained_low, lost_high, gained_high, low=640, n=1280):
    s = (np.arange(n) >= low).astype(int)
    base, tier = np.full(n, 100.0), np.full(n, 100.0)
    tier[:lost_low] = 0
    base[lost_low:lost_low + gained_low] = 0
    tier[low:low + lost_high] = 0
    base[low + lost_high:low + lost_high + gained_high] = 0
    return replay_strata.Items.of(s, base, tier)


def test_moving_to_the_margin_puts_the_losses_where_asked():
    it = items(20, 0, 0, 0)
    for put, where in (("low", 0), ("high", 1)):
        w, lost, gained = it.rates(-3.0, put)
        assert float((w * (gained - lost)).sum()) == pytest.approx(-0.03)
        assert lost[1 - where] == pytest.approx([20 / 640, 0.0][1 - where])
    w, lost, _ = items(60, 0, 0, 0).rates(-3.0, "high")      # above the margin: losses taken off where they are
    assert lost[1] == 0 and float((w * lost).sum()) == pytest.approx(0.03)


def test_a_stratified_read_is_moved_from_its_weighted_delta():
    # 640 close calls read whole (60 lost), 320 of 640 sure ones read (20 lost): the population's delta is
    # (60 + 2 x 20) / 1280 = -7.8 points, the read items' plain mean -8.3
    s = np.r_[np.zeros(640, int), np.ones(320, int)]
    base, tier = np.full(960, 100.0), np.full(960, 100.0)
    tier[:60], tier[640:660] = 0, 0
    it = replay_strata.Items.of(s, base, tier, pool=(640, 640))
    w, lost, gained = it.rates(-7.8125, "shape")
    assert w.tolist() == [0.5, 0.5] and lost == pytest.approx([60 / 640, 20 / 320])    # already there
    w, lost, gained = it.rates(-3.0, "shape")
    assert float((w * (gained - lost)).sum()) == pytest.approx(-0.03)
    found = replay_strata.rates(it, [0.25, 0.5, 0.75, 1.0], 1280, 0.95, 3.0, 0.5, sims=2000)
    for name, rates in found.items():
        assert rates[0].value <= 0.025 + 2 * rates[0].mc_se, (name, rates[0].line())


@pytest.mark.parametrize("case", [(20, 0, 0, 0), (60, 40, 5, 4), (3, 0, 0, 0, 200)])
def test_the_floored_design_keeps_its_false_pass_rate_where_the_unfloored_one_may_not(case):
    it = items(*case)
    found = replay_strata.rates(it, [0.25, 0.5, 0.75, 1.0], 1280, 0.95, 3.0, 0.25, sims=3000)
    for name, rates in found.items():
        fp = rates[0]
        assert fp.value <= 0.025 + 2 * fp.mc_se, (name, fp.line())
    assert found["stratified, losses shape"][4].value < 0.7 * found["unstratified"][4].value


def test_without_the_floor_the_adversarial_case_passes_too_often():
    # the check above can fail: the same design without the floor, every extra loss in the high stratum
    found = replay_strata.rates(items(3, 0, 0, 0, 200), [0.25, 0.5, 0.75, 1.0], 1280, 0.95, 3.0, 0.25,
                                sims=3000, floor=0.0)
    assert found["stratified, losses high"][0].value > 0.04
