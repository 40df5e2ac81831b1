"""scripts/fan_out.py's shares: which stages the upstream, each worker and the aggregate run (unit)."""
import pytest

from scripts import fan_out

NAMES = ["check", "evalsets", "prepare@m", "quantize@m-fp16", "quantize@m-int8", "noise@m", "baseline@m",
         "evaluate@m-fp16-auto", "evaluate@m-fp16-fp8", "evaluate@m-int8-auto", "evaluate@m-int8-fp8", "decide"]


def test_the_upstream_is_every_stage_but_the_evaluations_and_decide():
    assert fan_out.upstream(NAMES) == NAMES[:7]


def test_the_workers_shares_cover_every_evaluation_once_and_differ_by_at_most_one():
    for workers in (1, 2, 3, 5):
        shares = [fan_out.share(NAMES, k, workers) for k in range(workers)]
        assert sorted(s for share in shares for s in share) == fan_out.evaluations(NAMES)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_a_worker_index_out_of_range_is_one_line():
    with pytest.raises(SystemExit, match=r"^qtier: worker 2 of 2: the worker index runs from 0 to 1$"):
        fan_out.share(NAMES, 2, 2)
