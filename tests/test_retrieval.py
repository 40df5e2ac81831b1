"""The synthetic retrieval suite (pipeline/domain/sets/retrieval.py): determinism, length, depth, scoring.
Fake token counters: words, and characters / 4 (not additive over a join, like a real tokenizer)."""
import functools
import random
import re

import pytest

from pipeline.domain.sets import retrieval


def words(s: str) -> int:
    return len(s.split())


def quarter_chars(s: str) -> int:
    return -(-len(s) // 4)


LENGTHS, DEPTHS = (256, 700), (0.0, 0.25, 0.5, 0.9, 1.0)


@functools.cache
def make(counter=words, seed=7, tasks=retrieval.TASKS, lengths=LENGTHS, depths=DEPTHS, per_cell=2):
    return retrieval.suite(tasks, lengths, depths, per_cell, seed, counter)


def longest_sentence(counter) -> int:
    return max(counter(s) for s in retrieval.filler_block(random.Random(0), 2000))


def test_deterministic_per_seed_and_seeds_differ():
    a, b, c = make(seed=7), retrieval.suite(retrieval.TASKS, LENGTHS, DEPTHS, 2, 7, words), make(seed=8)
    assert a == b
    assert len(a) == 3 * 2 * 5 * 2
    assert sum(x.prompt != y.prompt for x, y in zip(a, c)) == len(a)
    assert len({s.prompt for s in a}) == len(a)          # repetitions of a cell differ too


def test_a_cell_does_not_depend_on_the_others():
    alone = retrieval.suite(["niah_multikey"], [700], [0.5], 2, 7, words)
    among = [s for s in make() if (s.task, s.target_tokens, s.depth) == ("niah_multikey", 700, 0.5)]
    assert alone == among


@pytest.mark.parametrize("counter", [words, quarter_chars])
def test_length_within_one_sentence_of_the_target(counter):
    u = longest_sentence(counter)
    for s in make(counter):
        assert s.tokens == counter(s.prompt)
        assert s.target_tokens - (u + 2) <= s.tokens <= s.target_tokens, s.id


def _filler_around_needle(s: retrieval.Sample, needle: str) -> tuple[str, str]:
    """The filler before and after `needle`, read back from the prompt text: intro, question and every
    needle sentence removed."""
    intro_end = s.prompt.index(" there." if s.task == "passkey" else " afterwards.")
    intro_end = s.prompt.index(".", intro_end) + 1
    before, _, after = s.prompt[intro_end:s.prompt.index(" What is the")].partition(needle)
    strip = re.compile(r"(The pass key is \d+\. Remember it\. \d+ is the pass key\.)|"
                       r"(One of the special magic numbers for [a-z-]+ is: \d+\.)")
    return (" ".join(strip.sub(" ", before).split()), " ".join(strip.sub(" ", after).split()))


def _asked_needle(s: retrieval.Sample) -> str:
    if s.task == "passkey":
        return f"The pass key is {s.answer}. Remember it. {s.answer} is the pass key."
    return f"One of the special magic numbers for {s.key} is: {s.answer}."


@pytest.mark.parametrize("counter", [words, quarter_chars])
def test_needle_at_the_stated_depth(counter):
    u = longest_sentence(counter)
    for s in make(counter):
        before, after = _filler_around_needle(s, _asked_needle(s))
        b, a = (counter(x) if x else 0 for x in (before, after))
        measured = b / (a + b)
        assert measured == pytest.approx(s.needle_depth, abs=1e-12), s.id     # the recorded field is this
        assert abs(measured - s.depth) <= (u + 2) / (a + b), s.id
        if s.depth == 0.0:
            assert before == ""
        if s.depth == 1.0:
            assert after == ""


def test_needle_depth_tolerance_shrinks_with_length():
    long = retrieval.suite(["niah_single"], [4096], [0.37], 1, 3, words)[0]
    assert abs(long.needle_depth - 0.37) < 0.005


def test_prompts_hold_their_needles_and_nothing_else_numeric():
    for s in make():
        digits = re.findall(r"\d+", s.prompt)
        needle = _asked_needle(s)
        assert s.prompt.count(needle) == 1
        if s.task == "passkey":
            assert len(s.answer) == 5 and digits == [s.answer, s.answer]
            assert s.prompt.endswith("What is the pass key? The pass key is")
        elif s.task == "niah_single":
            assert len(s.answer) == 7 and digits == [s.answer]
            assert s.prompt.endswith(f"The special magic number for {s.key} mentioned in the provided text is")
        else:
            keys = re.findall(r"magic numbers for ([a-z-]+) is: (\d+)\.", s.prompt)
            assert len(keys) == 4 and len({k for k, _ in keys}) == 4 and len({v for _, v in keys}) == 4
            assert (s.key, s.answer) in keys and sorted(digits) == sorted(v for _, v in keys)


def test_distractors_are_spread_not_stacked_on_the_needle():
    multi = make(tasks=("niah_multikey",), lengths=(1024,), depths=(0.5,), per_cell=20)
    positions = []
    for s in multi:
        for k, _ in re.findall(r"magic numbers for ([a-z-]+) is: (\d+)\.", s.prompt):
            if k != s.key:
                positions.append(s.prompt.index(f"numbers for {k} ") / len(s.prompt))
    assert min(positions) < 0.25 and max(positions) > 0.75


def test_bad_inputs_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown task 'haystack'"):
        retrieval.suite(["haystack"], [512], [0.5], 1, 0, words)
    with pytest.raises(ValueError, match="depths must be in"):
        retrieval.suite(["passkey"], [512], [1.5], 1, 0, words)
    with pytest.raises(ValueError, match="more than the target length 20"):
        retrieval.suite(["niah_single"], [20], [0.5], 1, 0, words)


@pytest.mark.parametrize("generation,ok", [
    ("71432", True), (" 71432.", True), ("The pass key is 71432", True), ("71432 is the pass key.", True),
    ("\n 71432\n", True), ("7143", False), ("714320", False), ("71,432", False), ("12345 or 71432", False),
    ("", False), ("seventy-one thousand", False), ("071432", False),
])
def test_exact_match_on_the_first_number(generation, ok):
    assert retrieval.score(generation, "71432") is ok


def test_sample_as_dict_is_plain():
    s = make(tasks=("passkey",), lengths=(256,), depths=(0.5,), per_cell=1)[0]
    d = s.as_dict()
    assert d["id"] == "passkey-256-0.5-0" and d["answer"] == s.answer and d["key"] is None


@pytest.mark.model
def test_tolerances_hold_with_a_real_bpe_tokenizer(tmp_path, root):
    """A byte-level BPE (tests/tiny_model.py's) merges across the joins the fake counters do not."""
    from tokenizers import Tokenizer

    from tests import tiny_model

    tok = Tokenizer.from_file(str(tiny_model.build(tmp_path / "m", root) / "tokenizer.json"))

    def bpe(s: str) -> int:
        return len(tok.encode(s).ids)

    u = longest_sentence(bpe)
    for s in retrieval.suite(retrieval.TASKS, [512, 2048], [0.0, 0.3, 0.5, 1.0], 1, 11, bpe):
        assert s.target_tokens - (u + 2) <= s.tokens <= s.target_tokens, s.id
        before, after = _filler_around_needle(s, _asked_needle(s))
        b, a = (bpe(x) if x else 0 for x in (before, after))
        assert abs(b / (a + b) - s.depth) <= (u + 2) / (a + b), s.id


def test_a_length_of_the_suite_is_a_generate_task_scored_by_exact_match(tmp_path, in_repo):
    """retrieval.write_jsonl's file is the data of eval_sets/tasks/retrieval.yaml: per-sample exact match
    (for the paired intervals) and lm-eval's aggregate (the hook) agree, in percent."""
    from pipeline.domain.sets import task_rows, tasks
    from pipeline.schema import Task

    samples = retrieval.suite(["passkey", "niah_multikey"], [256], [0.5], 2, 5, words)
    path = tmp_path / "retrieval_256.jsonl"
    retrieval.write_jsonl(samples, path)
    spec = tasks.build("retrieval_256", Task(config="eval_sets/tasks/retrieval.yaml", data=str(path), kind="generate"))
    assert spec.num_docs == 4 and spec.higher_is_better == {"exact_match": True}
    outputs = [f" {samples[0].answer}.", "I do not know.", f"The special magic number is {samples[2].answer}",
               f"{samples[3].answer[:-1]}"]
    rows, per_doc = [], []
    for i, (s, out) in enumerate(zip(samples, outputs)):
        doc = {"prompt": s.prompt, "answer": s.answer, "id": s.id}
        record = {"doc_id": i, "doc": doc, "target": s.answer, "arguments": [(s.prompt, {})],
                  "resps": [[out]], "filtered_resps": [out], "filter": "none"}
        rows.append(task_rows.sample_row(spec, record))
        per_doc.append(spec.config["process_results"](doc, [out]))
    assert [r.scores["exact_match"] for r in rows] == [100.0, 0.0, 100.0, 0.0]
    agg = spec.config["metric_list"][0]["aggregation"]([d["exact_match"] for d in per_doc])
    assert agg == 50.0


def test_the_task_lets_an_instruct_model_restate_the_question_before_the_number(root):
    """The chat template puts the question's answer prefix in the user turn, so an instruct model starts
    its answer by restating it (SmolLM2: "The special magic number for pale-heron mentioned in the
    provided text is 9627830."). At 16 new tokens every such answer was cut before its number and
    scored 0; the budget must hold the longest restatement and the 7-digit answer, each word and each
    digit at least one token."""
    import yaml

    config = yaml.safe_load((root / "eval_sets/tasks/retrieval.yaml").read_text().replace("!function", ""))
    longest = max((s for s in retrieval.suite(["niah_single", "niah_multikey", "passkey"], [700], [0.5], 4, 1, words)),
                  key=lambda s: len(s.prompt.rsplit("?", 1)[1].split()) + len(s.answer))
    restated = longest.prompt.rsplit("?", 1)[1].split()
    assert config["generation_kwargs"]["max_gen_toks"] >= len(restated) + len(longest.answer) + 4


def test_a_sample_id_gives_back_its_task_and_length():
    for s in retrieval.suite(["passkey", "niah_multikey"], [256, 700], [0.0, 0.25, 1.0], 2, 5, words):
        assert retrieval.parse_id(s.id) == (s.task, s.target_tokens)
    assert [retrieval.parse_id(x) for x in ("sen-001", "qa-1024-0.5-0", None, 7)] == [None] * 4
