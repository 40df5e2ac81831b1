"""benchmarks/check_reach.py: the shift of an item's choice differences and the rule's errors."""
from __future__ import annotations

from benchmarks import check_reach as cr
from pipeline.domain.sets.sample_row import partial


def r(doc, a, b):
    return partial(doc_id=doc, logliks=[a, b], pred=int(b > a))


def test_shift_is_the_largest_change_of_a_difference_between_choices():
    assert cr.shift(partial(logliks=[-1.0, -2.0]), partial(logliks=[-1.5, -2.5])) == 0.0      # all moved alike
    assert abs(cr.shift(partial(logliks=[-1.0, -2.0, -3.0]), partial(logliks=[-1.1, -2.0, -2.8])) - 0.3) < 1e-12


def test_a_far_item_the_second_arithmetic_flipped_counts_as_an_error_of_the_rule():
    both = cr.pairs([r(0, -1.0, -1.1), r(1, -1.0, -2.0), r(2, -1.0, -3.0), partial(doc_id=3, output="x")],
                    [r(0, -1.2, -1.0), r(1, -2.5, -1.0), r(2, -1.0, -3.1)])
    got = cr.row("c", 0.1, both)
    assert got == {"task": "c", "checked": 3, "copy": 2, "largest": got["largest"], "flipped": 1}
    assert abs(got["largest"] - 2.5) < 1e-12
