"""The throughput probe's prompts (pipeline/domain/sets/prompts.py): what the generation-speed measurement
feeds the model. Model tier: lm-eval's template engine imports torch. (The roofline, the wall limit
and the wall budget are in tests/test_slo.py.)"""
import json
from types import SimpleNamespace

import pytest

from pipeline.domain.sets import tasks
from pipeline.domain.sets.prompts import throughput_prompts
from pipeline.schema import Languages, Task

pytestmark = pytest.mark.model


EN_DE = Languages(source="English", target="German")
TRANSLATION = Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl",
                   kind="generate", languages=EN_DE)
CLASSIFICATION = Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl",
                      kind="classify", labels=["negative", "positive"])
# eval_sets/tasks/translation.yaml's doc_to_text with the languages filled in, over the file's first rows
TRANSLATE = "Translate this English sentence into German. Reply with the German translation only.\n\n"


def test_throughput_prompts_are_the_first_generation_tasks_rendered_prompts(in_repo):
    specs = [tasks.build("classification", CLASSIFICATION), tasks.build("translation", TRANSLATION)]
    assert throughput_prompts(specs, 2, chat=False) == [TRANSLATE + "The train to Munich leaves at nine.\n\nGerman:",
                                                     TRANSLATE + "It will rain tomorrow afternoon.\n\nGerman:"]
    # an instruct model is asked the request alone: its chat template opens the answer's turn
    assert throughput_prompts(specs, 1, chat=True) == [TRANSLATE + "The train to Munich leaves at nine."]


def test_throughput_prompts_map_the_users_field_names(in_repo, tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"en": s, "de": "x"}) + "\n" for s in ("One.", "Two.", "Three.")))
    mine = Task(config=TRANSLATION.config, data=str(data), kind="generate", fields={"source": "en", "reference": "de"},
                languages=EN_DE)
    assert throughput_prompts([tasks.build("translation", mine)], 5, chat=False) == [
        TRANSLATE + f"{s}\n\nGerman:" for s in ("One.", "Two.", "Three.")]        # fewer rows than asked: all of them


def test_throughput_prompts_without_a_generation_task_use_the_first_local_one(in_repo):
    specs = [tasks.build("classification", CLASSIFICATION)]
    assert throughput_prompts(specs, 1, chat=False) == [
        "Is the sentiment of this review positive or negative? Answer with one word.\n\n"
        "The app keeps crashing, so the smart scale is basically useless."]


def test_throughput_prompts_of_registry_tasks_only_come_from_the_first_tasks_docs():
    class RegistryTask:          # what throughput_prompts reads of an lm-eval Task
        eval_docs = [{"q": 1}, {"q": 2}, {"q": 3}]

        @staticmethod
        def doc_to_text(doc):
            return f"Q{doc['q']}?"

    other = SimpleNamespace(doc_to_text=lambda doc: "never", eval_docs=[{"q": 9}])
    specs = [tasks.TaskSpec("arc", "lm_eval", RegistryTask(), "arc_easy", 3, {}),
             tasks.TaskSpec("other", "lm_eval", other, "other", 1, {})]
    assert throughput_prompts(specs, 2, chat=False) == ["Q1?", "Q2?"]
