"""The generation tasks give a base model something to answer (issue 55 item 2): the prompt ends with a
cue ("Summary:", "German:") the answer follows, and a stop string that a leading newline does not match.

A fake base model (BaseModel) writes what one wrote on the default tasks: a newline, the answer, then
more text; its stop strings are applied as vLLM and lm-eval's HFLM apply `until` (the text is cut before
the first stop string it contains). Run through lm-eval and qtier's rows, as evaluate runs them.
"""
from dataclasses import replace
from types import SimpleNamespace

import pytest
from lm_eval.api.model import LM

from pipeline.domain.sets import metrics, tasks
from pipeline.evaluation import lm_eval_runner
from pipeline.schema import Eval, Languages, Task

pytestmark = pytest.mark.model          # lm-eval builds the task through `datasets`, which imports torch

SUM = Task(config="eval_sets/tasks/summarization.yaml", data="eval_sets/summarization.jsonl", kind="generate",
           limit=3)
TR = Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl", kind="generate",
          limit=3, languages=Languages(source="English", target="German"))


def cut(text: str, until: list[str]) -> str:
    """The text before the first stop string in it (vLLM's `stop`, lm-eval's postprocess_generated_text)."""
    ends = [text.find(s) for s in until if s and s in text]
    return text[:min(ends)] if ends else text


class BaseModel(LM):
    """Answers every prompt with `opening` (a newline; a blank line), `answer`, then a second paragraph."""

    def __init__(self, answer: str, opening: str = "\n"):
        super().__init__()
        self.answer, self.opening, self.contexts, self.asked = answer, opening, [], 0

    def generate_until(self, requests):
        self.contexts += [r.args[0] for r in requests]
        self.asked += len(requests)
        return [cut(f"{self.opening}{self.answer}\n\nThe next article is about", r.args[1]["until"])
                for r in requests]

    def apply_chat_template(self, chat_history, add_generation_prompt=True):
        """A chat template: each turn in tags; without a generation prompt the last turn is continued."""
        turns = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in chat_history)
        return turns + "<assistant>" if add_generation_prompt else turns.removesuffix("</assistant>")

    @property
    def tokenizer_name(self):
        return "fake-chat"

    def loglikelihood(self, requests):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError


def run(task: Task, name: str, model: BaseModel, chat: bool = False, old: bool = False):
    spec = tasks.build(name, task)
    if old:     # the config before issue 55: no cue, the answer cut at the first newline
        cfg = {k: v for k, v in spec.config.items() if k not in ("gen_prefix", "target_delimiter")}
        spec = replace(spec, config={**cfg, "generation_kwargs": {**cfg["generation_kwargs"], "until": ["\n"]}})
    found, rows = lm_eval_runner.run_tasks(SimpleNamespace(lm=model, chat=chat), [spec], Eval(tasks={}))
    return found[name], rows[name]


@pytest.mark.parametrize("task, name, answer, cue", [
    (SUM, "summarization", "The library in Larkfield will open longer from June.", "Summary:"),
    (TR, "translation", "Der Zug nach München fährt um neun ab.", "German:")])
def test_a_base_model_that_starts_with_a_newline_is_answered_and_scored(in_repo, task, name, answer, cue):
    model = BaseModel(answer)
    result, rows = run(task, name, model)
    assert all(c.endswith("\n\n" + cue) for c in model.contexts)       # the cue after a blank line
    assert [metrics.clean_generation(r.output) for r in rows] == [answer] * 3
    assert all(v > 0 for v in result.metrics.values()) and result.metrics


@pytest.mark.parametrize("task, name, answer", [
    (SUM, "summarization", "The library in Larkfield will open longer from June."),
    (TR, "translation", "Der Zug nach München fährt um neun ab.")])
@pytest.mark.parametrize("chat", [False, True])
def test_an_answer_after_a_blank_line_is_asked_again_and_scored(in_repo, task, name, answer, chat):
    """The stop string (a blank line) ends such an answer before it starts; it is asked again without
    the stop and scored from its first line, its row flagged; a model that answers at once is not."""
    model = BaseModel(answer, opening="\n\n")
    result, rows = run(task, name, model, chat=chat)
    assert [metrics.clean_generation(r.output) for r in rows] == [answer] * 3
    assert all(r.reasked for r in rows) and model.asked == 6
    assert all(v > 0 for v in result.metrics.values()) and result.metrics
    at_once = BaseModel(answer)
    _, rows = run(task, name, at_once, chat=chat)
    assert not any(r.reasked for r in rows) and at_once.asked == 3


@pytest.mark.parametrize("task, name", [(SUM, "summarization"), (TR, "translation")])
def test_the_old_config_ended_the_answer_before_it_started_and_it_is_asked_again(in_repo, task, name):
    """Before issue 55 (no cue, `until: ["\n"]`) every answer here came back "" (ended before it
    started) and scored 0; now each is asked again, at a cost of one more request per answer."""
    model = BaseModel("Der Zug nach München fährt um neun ab.")
    result, rows = run(task, name, model, old=True)
    assert [r.output for r in rows] == ["Der Zug nach München fährt um neun ab."] * 3
    assert model.asked == 6 and all(r.reasked for r in rows)


def test_an_instruct_model_is_asked_the_request_alone_in_its_own_turn(in_repo):
    """Its chat template opens the answer's turn; the cue there cost the default instruct model 17 of 24
    translations (empty) and 4 points of ROUGE-L (tasks.in_prompt_format)."""
    model = BaseModel("Der Zug nach München fährt um neun ab.")
    _, rows = run(TR, "translation", model, chat=True)
    first = model.contexts[0]
    assert first.startswith("<user>Translate this English sentence into German.")
    assert first.endswith("</user><assistant>")                         # no cue: the template opens the turn
    assert metrics.clean_generation(rows[0].output) == "Der Zug nach München fährt um neun ab."
