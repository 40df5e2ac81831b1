"""The recommendation's order of candidates (pipeline/scoring/pick/sequence.py): weight classes within 1%,
KV bytes per token, then params.yaml's order. The pick's error rate is simulated in tests/test_pick.py."""
from pipeline.scoring.verdict.rows import Evidence, Judgement, Row
from pipeline.scoring.pick.sequence import in_sequence, run_length, same_memory, weight_classes
from tests import result_files


def row(tier, w, kv="auto", kvb=10) -> Row:
    return Row(result_files.measured(tier, kv, weight_bytes=w, kv_bytes_per_token=kvb), Evidence(), Judgement("pass"))


def names(rows):
    return [r.variant for r in rows]


def test_weights_within_one_percent_are_one_class_taken_in_params_order():
    rows = [row("int8", 1000), row("fp8", 1009), row("bnb", 995), row("int4", 500), row("fp16", 2000)]
    assert names(in_sequence(rows)) == ["fp16-auto", "int8-auto", "fp8-auto", "bnb-auto", "int4-auto"]
    # 2% apart: two classes, the larger first whatever params.yaml's order
    rows = [row("int8", 1000), row("fp8", 1020)]
    assert names(in_sequence(rows)) == ["fp8-auto", "int8-auto"]
    assert names(in_sequence(rows, tie=0.05)) == ["int8-auto", "fp8-auto"]


def test_a_class_is_measured_from_its_largest_member_so_a_chain_of_small_steps_does_not_merge():
    rows = [row("a", 1000), row("b", 995), row("c", 989), row("d", 985)]
    cls = weight_classes(rows)
    assert [cls[id(r)] for r in rows] == [0, 0, 1, 1]


def test_within_a_weight_class_the_larger_kv_cache_comes_first():
    rows = [row("int8", 1000, "fp8", 5), row("fp8", 1001, "auto", 10), row("int8", 1000, "auto", 10)]
    assert names(in_sequence(rows)) == ["fp8-auto", "int8-auto", "int8-fp8"]
    cls = weight_classes(rows)
    assert same_memory(rows[1], rows[2], cls) and not same_memory(rows[0], rows[2], cls)


def test_unknown_memory_goes_first_and_the_pick_is_the_last_of_the_first_run_of_passes():
    rows = [row("a", 10), row("b", None)]
    assert names(in_sequence(rows)) == ["b-auto", "a-auto"]
    assert run_length([True, True, False, True]) == 2
    assert run_length([False, True]) == 0 and run_length([]) == 0
