"""The evaluate stage's helpers that need no model: the decode roofline, the wall limit and the wall
budget over lm-eval's tasks (with a fake run), and the prompts of the throughput measurement.
Model tier: pipeline/stages/evaluate.py imports the backends, and with them torch."""
import json
import time
from types import SimpleNamespace

import pytest

from pipeline.domain import tasks
from pipeline.schema import Languages, Task
from pipeline.stages import evaluate

pytestmark = pytest.mark.model


def test_evaluate_roofline_uses_concurrency_1_tpot_or_says_what_is_unknown():
    tp = {"bench": {"1": {"median_tpot_ms": 40.0}}, "decode_probe_tokens_per_s": 20.0}
    r = evaluate.roofline(tp, 10**9, 100.0)
    assert r["decode_tokens_per_s"] == 25.0 and r["fraction"] == pytest.approx(0.25)
    assert r["roofline_tokens_per_s"] == 100.0
    assert evaluate.roofline(tp, 10**9, None)["unknown"] == "bandwidth unknown (serving.bandwidth_gbps)"
    assert "fraction" not in evaluate.roofline(tp, None, 100.0)
    assert evaluate.roofline({"decode_probe_tokens_per_s": 20.0}, 10**9, 100.0)["fraction"] == pytest.approx(0.2)


def test_wall_limit_interrupts_the_main_thread():
    with pytest.raises(evaluate.WallBudgetExceeded):
        with evaluate.wall_limit(0.2):
            time.sleep(3)
    with evaluate.wall_limit(None):
        pass


def _fake_run(slow: set[str], calls: list):
    def run(session, specs, ev):
        calls.append([s.name for s in specs])
        for s in specs:
            if s.name in slow:
                time.sleep(5)
        return {s.name: f"result {s.name}" for s in specs}, {s.name: [] for s in specs}
    return run


def test_the_wall_budget_keeps_the_tasks_lm_eval_finished():
    specs = [SimpleNamespace(name=n) for n in ("classification", "summarization", "translation")]
    calls: list = []
    metrics, samples, cut = evaluate.run_within(None, specs, None, 1.0, run=_fake_run({"summarization"}, calls))
    assert list(metrics) == ["classification"] and list(samples) == ["classification"]
    assert cut.startswith("too slow here: lm-eval stopped after 1 s") and cut.endswith("summarization, translation")
    with pytest.raises(evaluate.Unsupported, match="too slow here"):
        evaluate.run_within(None, specs, None, 1.0, run=_fake_run({"classification"}, []))
    calls.clear()                               # no budget: one call, lm-eval batches the tasks together
    metrics, _, cut = evaluate.run_within(None, specs, None, None, run=_fake_run(set(), calls))
    assert cut is None and len(metrics) == 3 and calls == [["classification", "summarization", "translation"]]


# --- throughput_prompts: what the generation-speed measurement feeds the model ----------------------------------

EN_DE = Languages(source="English", target="German")
TRANSLATION = Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl",
                   kind="generate", languages=EN_DE)
CLASSIFICATION = Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl",
                      kind="classify", labels=["negative", "positive"])
# eval_sets/tasks/translation.yaml's doc_to_text with the languages filled in, over the file's first rows
TRANSLATE = "Translate this English sentence into German. Reply with the German translation only.\n\n"


def test_throughput_prompts_are_the_first_generation_tasks_rendered_prompts(in_repo):
    specs = [tasks.build("classification", CLASSIFICATION), tasks.build("translation", TRANSLATION)]
    assert evaluate.throughput_prompts(specs, 2) == [TRANSLATE + "The train to Munich leaves at nine.",
                                                     TRANSLATE + "It will rain tomorrow afternoon."]


def test_throughput_prompts_map_the_users_field_names(in_repo, tmp_path):
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"en": s, "de": "x"}) + "\n" for s in ("One.", "Two.", "Three.")))
    mine = Task(config=TRANSLATION.config, data=str(data), kind="generate", fields={"source": "en", "reference": "de"},
                languages=EN_DE)
    assert evaluate.throughput_prompts([tasks.build("translation", mine)], 5) == [
        TRANSLATE + "One.", TRANSLATE + "Two.", TRANSLATE + "Three."]        # fewer rows than asked: all of them


def test_throughput_prompts_without_a_generation_task_use_the_first_local_one(in_repo):
    specs = [tasks.build("classification", CLASSIFICATION)]
    assert evaluate.throughput_prompts(specs, 1) == [
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
    assert evaluate.throughput_prompts(specs, 2) == ["Q1?", "Q2?"]
