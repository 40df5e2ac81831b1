"""The prompts of the throughput probe: rendered from the run's own tasks, the way lm-eval renders them."""
from __future__ import annotations

from pipeline import io
from pipeline.domain.sets import tasks


def throughput_prompts(specs: list[tasks.TaskSpec], n: int, chat: bool) -> list[str]:
    """The first n prompts of the first generation task, rendered by lm-eval's template engine in the
    model's prompt format (`chat`: the request alone, its template added by the engine; with only
    registry tasks: the first one's prompts, rendered by lm-eval's Task)."""
    from lm_eval.api.utils import maybe_delimit
    from lm_eval.utils import apply_template

    local = [s for s in specs if s.kind != "lm_eval"]
    if not local:
        task = specs[0].config
        return [str(task.doc_to_text(doc)) for doc in list(task.eval_docs)[:n]]
    spec = next((s for s in local if s.kind == "generate"), local[0])
    data = spec.config["dataset_kwargs"]["data_files"]["test"]
    rows = io.read_jsonl(data)[:n]
    dataset = spec.config["process_docs"](_to_dataset(rows))
    cue = tasks.in_prompt_format(spec.config, chat).get("gen_prefix")     # as lm-eval builds it
    return [maybe_delimit(apply_template(spec.config["doc_to_text"], doc), cue and apply_template(cue, doc),
                          spec.config.get("target_delimiter", " ")) for doc in dataset]


def _to_dataset(rows: list[dict]):
    from datasets import Dataset

    return Dataset.from_list(rows)
