"""Eval tasks: lm-eval task YAMLs (the declaration) + params.yaml (data file, field names, labels, limit).

The YAML templates use canonical field names; `fields` in params maps them to the user's JSONL
columns, so a user points a task at their own data without touching the YAML.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline import paths
from pipeline.domain import metrics, public_sets
from pipeline.io import DataError, read_jsonl
from pipeline.schema import ConfigError, Task

_VAR = re.compile(r"{{\s*([A-Za-z_]\w*)\s*}}")


@dataclass(frozen=True)
class TaskSpec:
    name: str
    kind: str
    config: dict            # lm-eval task config, ready for simple_evaluate(tasks=[...])
    lm_eval_name: str
    num_docs: int           # docs evaluated (after the limit)
    higher_is_better: dict[str, bool]


def load_yaml(path: str | Path) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml as lm_load_yaml

    return lm_load_yaml(Path(path), resolve_func=True, recursive=True)


class _DeclLoader(yaml.SafeLoader):
    """Reads a task YAML for validation without importing its `!function` hooks."""


_DeclLoader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def data_file(name: str, task: Task) -> Path:
    """The JSONL a task reads: its local file, or the evalsets stage's copy of a public set."""
    return paths.eval_data(name) if public_sets.is_public(task.data) else Path(task.data)


def check_files(name: str, task: Task, root: Path) -> None:
    """The task's YAML and (local) data file exist."""
    for attr in ("config", "data"):
        value = getattr(task, attr)
        if attr == "data" and public_sets.is_public(value):
            public_sets.parse(f"eval.tasks.{name}.data", value)    # offline: the name and options
            continue
        if not (root / value).is_file():
            raise ConfigError(f"eval.tasks.{name}.{attr}: file not found: {value}")


def check_data(name: str, task: Task, root: Path, path: Path | None = None) -> int | None:
    """Validate a task's rows against its template and labels, before any model is loaded.
    `path` defaults to the task's local file; a public set (no path given) is checked by the
    evalsets stage once fetched, so this returns None for it. Errors name the file and line."""
    if path is None:
        if public_sets.is_public(task.data):
            return None
        path = Path(task.data)
    cfg = yaml.load((root / task.config).read_text(encoding="utf-8"), Loader=_DeclLoader)  # noqa: S506
    canonical = [f for f in template_fields(cfg) if not (task.kind == "classify" and f in ("gold", "choices"))]
    rows = read_jsonl(path, root=root)
    check_rows(name, task, rows, field_map(task, canonical), path)
    return len(rows)


def declared_metrics(task: Task, root: Path) -> list[str]:
    """The metrics a task's YAML declares in its metric_list, read without importing its hooks."""
    cfg = yaml.load((root / task.config).read_text(encoding="utf-8"), Loader=_DeclLoader)  # noqa: S506
    return [m["metric"] for m in cfg.get("metric_list", [])]


def planned_samples(task: Task, root: Path) -> int | None:
    """Samples an evaluate run will score: the limit, capped by a local file's rows. None for a public
    set without a limit (its size is known once the evalsets stage has fetched it)."""
    if public_sets.is_public(task.data):
        return task.limit
    rows = len(read_jsonl(task.data, root=root))
    return rows if task.limit is None else min(task.limit, rows)


def read_samples(variant_dir: Path) -> dict[str, list[dict]]:
    """task -> the per-sample rows an evaluate stage wrote under <variant_dir>/samples/ (see sample_row)."""
    folder = variant_dir / "samples"
    return {f.stem: read_jsonl(f) for f in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


def template_fields(cfg: dict) -> list[str]:
    """Canonical fields the prompt and target templates read."""
    names: list[str] = []
    for key in ("doc_to_text", "doc_to_target"):
        value = cfg.get(key)
        if isinstance(value, str):
            names += [n for n in _VAR.findall(value) if n not in names]
    return names


def field_map(task: Task, canonical: list[str]) -> dict[str, str]:
    return {c: task.fields.get(c, c) for c in canonical}


def normalise(row: dict, mapping: dict[str, str], task: Task) -> dict:
    doc = {canon: row[user] for canon, user in mapping.items()}
    doc["id"] = str(row.get("id", ""))
    if task.kind == "classify":
        doc["choices"] = list(task.labels)
        doc["gold"] = task.labels.index(row[task.fields.get("label", "label")])
    return doc


def check_rows(name: str, task: Task, rows: list[dict], mapping: dict[str, str], path: Path) -> None:
    """Every row has every mapped field; every label is in the label list. Errors name file:line."""
    label_field = task.fields.get("label", "label")
    for n, row in enumerate(rows, 1):
        for canon, user in mapping.items():
            if user not in row or row[user] in (None, ""):
                raise DataError(
                    f"{path}:{n}: missing field {user!r} (eval.tasks.{name}.fields.{canon})"
                )
        if task.kind == "classify":
            if label_field not in row:
                raise DataError(f"{path}:{n}: missing label field {label_field!r}")
            if row[label_field] not in task.labels:
                raise DataError(
                    f"{path}:{n}: label {row[label_field]!r} is not in eval.tasks.{name}.labels {task.labels}"
                )


def build(name: str, task: Task) -> TaskSpec:
    cfg = load_yaml(task.config)
    canonical = [f for f in template_fields(cfg) if not (task.kind == "classify" and f in ("gold", "choices"))]
    mapping = field_map(task, canonical)
    path = data_file(name, task)
    rows = read_jsonl(path)
    check_rows(name, task, rows, mapping, path)
    n = len(rows) if task.limit is None else min(task.limit, len(rows))

    def process_docs(dataset):
        return dataset.map(lambda row: normalise(row, mapping, task), remove_columns=dataset.column_names)

    cfg = dict(cfg)
    cfg["dataset_path"] = "json"
    cfg["dataset_kwargs"] = {"data_files": {"test": str(path)}}
    cfg["test_split"] = "test"
    cfg["process_docs"] = process_docs
    hib = {m["metric"]: bool(m.get("higher_is_better", True)) for m in cfg.get("metric_list", [])}
    return TaskSpec(name=name, kind=task.kind, config=cfg, lm_eval_name=cfg["task"], num_docs=n,
                    higher_is_better=hib)


def build_all(tasks: dict[str, Task]) -> list[TaskSpec]:
    return [build(name, t) for name, t in tasks.items()]


def sample_row(spec: TaskSpec, s: dict[str, Any]) -> dict:
    """A compact per-sample log row from one lm-eval sample record."""
    doc = s["doc"]
    row: dict[str, Any] = {"id": doc.get("id", ""), "doc_id": s["doc_id"]}
    row["input"] = {k: v for k, v in doc.items() if k not in ("id", "choices", "gold")}
    row["target"] = s.get("target")
    if spec.kind == "classify":
        row["choices"] = doc["choices"]
        row["gold"] = doc["gold"]
        row["logliks"] = [float(r[0]) for r in s["filtered_resps"]]
        row["pred"] = max(range(len(row["logliks"])), key=row["logliks"].__getitem__)
    else:
        resp = s["filtered_resps"][0]
        row["output"] = resp if isinstance(resp, str) else resp[0]
    row["prompt_chars"] = len(str(s["arguments"][0][0])) if s.get("arguments") else None
    row["scores"] = per_sample_scores(spec, row)
    return row


def per_sample_scores(spec: TaskSpec, row: dict) -> dict[str, float]:
    """Per-sample scores for paired comparisons (corpus BLEU has no per-sample form: chrF stands in)."""
    hib = spec.higher_is_better
    if spec.kind == "classify":
        return {"acc": 100.0 * (row["pred"] == row["gold"])}
    hyp = metrics.clean_generation(row["output"])
    ref = str(row["target"])
    scores: dict[str, float] = {}
    if "chrf" in hib or "bleu" in hib:
        scores["chrf"] = metrics.sentence_chrf(ref, hyp)
    if any(m.startswith("rouge") for m in hib):
        scores.update(metrics.rouge(ref, hyp))
    return scores
