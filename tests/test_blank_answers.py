"""Answers that open with a blank line are asked again without the stop strings and scored as the
model gave them (pipeline/evaluation/blank_answers.py); answers that did not are never asked again."""
import pytest
from lm_eval.api.instance import Instance

from pipeline.evaluation import blank_answers

pytestmark = pytest.mark.unit


def request(context: str, until=("\n\n",), doc_id: int = 0) -> Instance:
    return Instance(request_type="generate_until", doc={}, arguments=(context, {"until": list(until)}), idx=0,
                    metadata=("task", doc_id, 1))


def cut(text: str, until: list[str]) -> str:
    """What a server or lm-eval returns: the text before the first stop string in it."""
    ends = [text.find(s) for s in until if s and s in text]
    return text[:min(ends)] if ends else text


class Model:
    """Answers `said[context]`, cut at the request's stop strings, which it pops from the request's
    kwargs as lm-eval's API models do; records every batch it is asked."""

    def __init__(self, said: dict[str, str]):
        self.said, self.batches = said, []

    def generate_until(self, requests, disable_tqdm=False):
        stops = [r.args[1].pop("until") for r in requests]
        self.batches.append([(r.args[0], s) for r, s in zip(requests, stops)])
        return [cut(self.said[r.args[0]], s) for r, s in zip(requests, stops)]


@pytest.mark.parametrize("text, until, answer", [
    ("\n\nDas ist gut.\n\nMore text", ["\n\n"], "Das ist gut."),
    ("  \n \nDas ist gut.", ["\n\n"], "Das ist gut."),
    ("Das ist gut.\n\nMore", ["\n\n", "</s>"], "Das ist gut."),
    ("\n\nEins</s>zwei\n\n", ["\n\n", "</s>"], "Eins"),
    ("\n\n\n", ["\n\n"], ""),
])
def test_first_answer_cuts_after_the_leading_blank_lines(text, until, answer):
    assert blank_answers.first_answer(text, until) == answer


def test_only_blank_answers_are_asked_again_in_one_batch_without_stops():
    model = Model({"a": "\n\nDas ist a.\n\nNoch", "b": "Das ist b.\n\nNoch", "c": "\n\nDas ist c."})
    reasked = blank_answers.reasking(model)
    out = model.generate_until([request("a"), request("b"), request("c")])
    assert out == ["Das ist a.", "Das ist b.", "Das ist c."]
    assert model.batches[1] == [("a", []), ("c", [])]       # asked again: the blank ones, no stops
    assert reasked == {("task", "a"), ("task", "c")}


def test_a_model_that_answers_at_once_is_asked_once():
    model = Model({"a": "Das ist a.\n\nNoch"})
    reasked = blank_answers.reasking(model)
    assert model.generate_until([request("a")]) == ["Das ist a."]
    assert len(model.batches) == 1 and not reasked


def test_wrapping_twice_asks_again_once():
    model = Model({"a": "\n\nDas ist a."})
    first = blank_answers.reasking(model)
    assert blank_answers.reasking(model) is first
    model.generate_until([request("a")])
    assert len(model.batches) == 2
