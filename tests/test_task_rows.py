"""pipeline/domain/sets/task_rows.py: lm-eval's logged samples as per-sample rows whose scores give back the
task's aggregate, and registry tasks' results on their own scale."""
import pytest

from pipeline.domain.sets import metrics, sample_row, task_rows, tasks
from pipeline.schema import Languages, Task

EN_DE = Languages(source="English", target="German")
TR = Task(config="eval_sets/tasks/translation.yaml", data="eval_sets/translation_en_de.jsonl", kind="generate",
          limit=5, languages=EN_DE)
CL = Task(config="eval_sets/tasks/classification.yaml", data="eval_sets/sentiment.jsonl", kind="classify",
          labels=["negative", "positive"])


def _record(doc_id, doc, target, filtered_resps, arguments):
    """One sample as lm-eval's evaluator logs it (log_samples=True), the fields sample_row reads."""
    return {"doc_id": doc_id, "doc": doc, "target": target, "arguments": arguments,
            "resps": [[r] for r in filtered_resps], "filtered_resps": filtered_resps, "filter": "none"}


def _aggregate(spec, records):
    """What lm-eval reports for a task: the YAML's process_results per doc, then each metric's aggregation."""
    per_doc = [spec.config["process_results"](r["doc"], r["filtered_resps"]) for r in records]
    return {m["metric"]: m["aggregation"]([d[m["metric"]] for d in per_doc]) for m in spec.config["metric_list"]}


def test_sample_row_classification_and_mean_acc_is_the_aggregate(in_repo):
    spec = tasks.build("classification", CL)
    # (gold, logliks of [negative, positive]): docs 0, 1, 3 and 5 right, 2 and 4 wrong
    cases = [(0, [-0.5, -2.0]), (1, [-3.0, -0.1]), (1, [-0.2, -1.0]), (0, [-1.0, -1.5]), (0, [-2.0, -0.3]),
             (1, [-4.0, -4.0 + 1e-3])]
    records = []
    for i, (gold, ll) in enumerate(cases):
        doc = {"text": f"review {i}", "id": f"r{i}", "choices": ["negative", "positive"], "gold": gold,
               "position": i}
        ctx = f"Is the sentiment of this review positive or negative?\n\nreview {i}"
        records.append(_record(i, doc, gold, [(x, False) for x in ll], [(ctx, c) for c in doc["choices"]]))
    rows = [task_rows.sample_row(spec, r) for r in records]
    assert sample_row.plain(rows[1]) == {"id": "r1", "doc_id": 1, "input": {"text": "review 1"}, "target": 1,
                       "choices": ["negative", "positive"], "gold": 1, "logliks": [-3.0, -0.1], "pred": 1,
                       "tied": False, "prompt_chars": len(records[1]["arguments"][0][0]), "scores": {"acc": 100.0}}
    assert [r.pred for r in rows] == [0, 1, 0, 0, 1, 1]
    assert [r.scores["acc"] for r in rows] == [100.0, 100.0, 0.0, 100.0, 0.0, 100.0]
    agg = _aggregate(spec, records)
    assert metrics.mean([r.scores["acc"] for r in rows]) == agg["acc"] == pytest.approx(400 / 6)
    assert metrics.macro_f1([r.gold for r in rows], [r.pred for r in rows], 2) == agg["macro_f1"]


def test_an_exact_tie_goes_to_no_label_in_particular_and_alike_on_both_sides_of_a_pair():
    """lm-eval's argmax gives every tie to the first choice: in bfloat16 that was 64 of 1,280 items."""
    picks = [metrics.choose([-2.0, -2.0], doc) for doc in range(6)]
    assert [p for p, _ in picks] == [0, 1, 0, 1, 0, 1] and all(t for _, t in picks)
    assert metrics.choose([-2.0, -2.0], 7) == metrics.choose([-2.0, -2.0], 7)
    assert metrics.choose([-1.0, -3.0, -1.0], 5) == (2, True)
    assert metrics.choose([-1.0, -0.5], 4) == (1, False)


def _tied_classification(spec):
    """Six reviews whose two labels' log-likelihoods tie exactly; the gold label alternates (0, 1, ...)."""
    records = []
    for i in range(6):
        doc = {"text": f"review {i}", "id": f"r{i}", "choices": ["negative", "positive"], "gold": i % 2,
               "position": i}
        records.append(_record(i, doc, i % 2, [(-2.0, False), (-2.0, False)],
                               [(f"review {i}", c) for c in doc["choices"]]))
    return records


def test_an_exact_tie_is_scored_by_one_rule_whichever_path_scores_the_task(in_repo):
    """Issue 53 item 4: the rows rotate a tie by the document's position; lm-eval's argmax gave every tie to
    label 0, and a task run whole took that aggregate (50 here) while its rows and its looks said 100."""
    spec = tasks.build("classification", CL)
    records = _tied_classification(spec)
    rows = [task_rows.sample_row(spec, r) for r in records]
    assert [r.pred for r in rows] == [0, 1, 0, 1, 0, 1] and all(r.tied for r in rows)
    argmax = [max(range(2), key=[ll for ll, _ in r["filtered_resps"]].__getitem__) for r in records]
    assert metrics.mean([100.0 * (p == r.gold) for p, r in zip(argmax, rows)]) == 50.0   # the old hook's rule
    hook = _aggregate(spec, records)                           # what lm-eval reports through the YAML's hook
    assert hook["acc"] == 100.0
    whole = task_rows.task_result(spec, {f"{m},none": v for m, v in hook.items()}, records).metrics
    looked = task_rows.scores_from_rows(spec, rows)              # the looks' and the sample cache's path
    assert whole == looked == {"acc": 100.0, "macro_f1": 100.0}
    # a task run whole takes its rows' scores even where lm-eval's aggregate says otherwise
    assert task_rows.task_result(spec, {"acc,none": 50.0, "macro_f1,none": 33.3}, records).metrics == whole


def test_sample_row_generation_and_mean_rouge_is_the_aggregate(in_repo):
    spec = tasks.build("summarization", Task(config="eval_sets/tasks/summarization.yaml",
                                             data="eval_sets/summarization.jsonl", kind="generate"))
    outputs = ["The cats were running home.", "\n  A court ruled for the city.  \nextra line", "Nothing alike."]
    refs = ["Cats run home.", "The court ruled for the city.", "Rain is expected tomorrow."]
    records = [_record(i, {"document": f"doc {i}", "reference": ref, "id": f"s{i}"}, ref, [out],
                       [(f"Summarize the following text in one sentence.\n\ndoc {i}", {"until": ["\n"]})])
               for i, (out, ref) in enumerate(zip(outputs, refs))]
    rows = [task_rows.sample_row(spec, r) for r in records]
    assert {k: getattr(rows[1], k) for k in ("id", "doc_id", "input", "target", "output")} == {
        "id": "s1", "doc_id": 1, "input": {"document": "doc 1", "reference": refs[1]}, "target": refs[1],
        "output": outputs[1]}
    assert rows[1].prompt_chars == len("Summarize the following text in one sentence.\n\ndoc 1")
    assert set(rows[0].scores) == {"rouge1", "rouge2", "rougeL"}
    assert rows[1].scores == metrics.rouge(refs[1], "A court ruled for the city.")   # the cleaned output
    agg = _aggregate(spec, records)
    for m in ("rouge1", "rouge2", "rougeL"):
        assert metrics.mean([r.scores[m] for r in rows]) == agg[m]
    assert 0 < agg["rougeL"] < 100


def test_sample_row_translation_feeds_the_corpus_scores(in_repo):
    spec = tasks.build("translation", TR)
    outputs = ["Der Zug fährt um neun ab.", "Es regnet.\nnoch eine Zeile"]
    refs = ["Der Zug fährt um neun Uhr ab.", "Morgen regnet es."]
    records = [_record(i, {"source": f"s{i}", "reference": ref, "id": str(i)}, ref, [out],
                       [(f"Translate ...\n\ns{i}", {"until": ["\n"]})])
               for i, (out, ref) in enumerate(zip(outputs, refs))]
    rows = [task_rows.sample_row(spec, r) for r in records]
    assert [set(r.scores) for r in rows] == [{"chrf"}, {"chrf"}]     # BLEU has no per-sample form
    assert rows[1].scores["chrf"] == metrics.sentence_chrf(refs[1], "Es regnet.")
    hyps = [metrics.clean_generation(r.output) for r in rows]
    agg = _aggregate(spec, records)
    assert metrics.corpus_bleu([r.target for r in rows], hyps) == agg["bleu"]
    assert metrics.corpus_chrf([r.target for r in rows], hyps) == agg["chrf"]


def _lm_sample(doc_id, acc, bleu_pair=("r", "h"), filt="none"):
    return {"doc_id": doc_id, "doc": {"q": doc_id}, "target": 0, "arguments": [(f"Question {doc_id}", " a")],
            "filtered_resps": [(-1.0, False), (-2.0, False)], "filter": filt, "metrics": ["acc", "bleu"],
            "acc": acc, "bleu": bleu_pair}


def test_task_result_of_a_registry_task_scales_per_sample_metrics_and_leaves_corpus_ones_bare():
    spec = tasks.TaskSpec(name="arc", kind="lm_eval", config=None, lm_eval_name="arc_easy", num_docs=4,
                          higher_is_better={"acc": True, "bleu": True})
    samples = [_lm_sample(i, a) for i, a in enumerate([1.0, 0.0, 1.0, 1.0])]
    results = {"acc,none": 0.75, "acc_stderr,none": 0.2, "bleu,none": 12.5}
    found = task_rows.task_result(spec, results, samples)
    assert found.metrics == {"acc": 75.0, "bleu": 12.5}        # acc on 0-100 like every qtier metric
    assert found.higher_is_better == {"acc": True, "bleu": True}
    assert [r.scores for r in found.rows] == [{"acc": 100.0}, {"acc": 0.0}, {"acc": 100.0}, {"acc": 100.0}]
    row = found.rows[0]
    assert row.lm_eval and row.input == {"prompt": "Question 0"} and row.output.startswith("choice 0")


def test_task_result_of_a_registry_task_uses_one_filter():
    spec = tasks.TaskSpec(name="g", kind="lm_eval", config=None, lm_eval_name="g", num_docs=2,
                          higher_is_better={"acc": True})
    samples = [_lm_sample(0, 1.0, filt="strict"), _lm_sample(1, 0.0, filt="strict"),
               _lm_sample(0, 0.0, filt="flex"), _lm_sample(1, 0.0, filt="flex")]
    found = task_rows.task_result(spec, {"acc,strict": 0.5, "acc,flex": 0.0}, samples)
    assert found.metrics == {"acc": 50.0} and [r.doc_id for r in found.rows] == [0, 1]


def _registry_result(metric, per_sample, aggregate):
    spec = tasks.TaskSpec(name="t", kind="lm_eval", config=None, lm_eval_name="t", num_docs=len(per_sample),
                          higher_is_better={metric: True})
    samples = [{"doc_id": i, "filter": "none", "arguments": [("q", " a")], "filtered_resps": ["a"], metric: v}
               for i, v in enumerate(per_sample)]
    return task_rows.task_result(spec, {f"{metric},none": aggregate}, samples)


def test_a_registry_metric_in_0_1_that_is_no_fraction_keeps_its_scale():
    found = _registry_result("brier_score", [0.1, 0.3], 0.2)
    assert found.metrics == {"brier_score": 0.2}
    assert [r.scores for r in found.rows] == [{"brier_score": 0.1}, {"brier_score": 0.3}]


def test_a_fraction_metric_is_scaled_even_without_per_sample_numbers():
    found = _registry_result("exact_match", [("gold", "pred"), ("gold", "gold")], 0.5)
    assert found.metrics == {"exact_match": 50.0} and [r.scores for r in found.rows] == [{}, {}]


def test_a_fraction_metric_outside_0_1_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"lm-eval metric 'acc': value 50 outside \[0, 1\]"):
        _registry_result("acc", [100.0, 0.0], 50.0)
