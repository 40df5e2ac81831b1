"""Eval tasks: lm-eval task YAMLs (the declaration) + params.yaml (data file, field names, labels, limit).

The YAML templates use canonical field names; `fields` in params maps them to the user's JSONL columns,
so a user points a task at their own data without touching the YAML. A translation prompt names its
languages as {{source_language}} / {{target_language}}, substituted from the task entry's `languages`
before lm-eval sees the template (a second language pair is a second entry, not a second YAML). Tasks of
kind lm_eval (lm-eval's registry, by name) are looked up and scored by pipeline/domain/sets/registry.py.
Every metric is identified as `<task>/<metric>` (metrics.metric_id) outside this module.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from pipeline import paths
from pipeline.domain.sets import metric_registry, probe_sets, public_sets, registry
from pipeline.domain.sets.metrics import metric_id
from pipeline.io import DataError, read_jsonl, read_text
from pipeline.schema import ConfigError, Task, Tolerance
from pipeline.schema.yaml_io import SafeLoader

_VAR = re.compile(r"{{\s*([A-Za-z_]\w*)\s*}}")
LANGUAGE_VARS = {"source_language": "source", "target_language": "target"}   # template var -> languages key
POSITION = "position"       # a classification doc's row in its data file (lm-eval's doc_id): metrics.choose's tie rule


@dataclass(frozen=True)
class TaskSpec:
    name: str
    kind: str
    config: Any             # lm-eval task config dict (a registry task: lm-eval's Task), for simple_evaluate
    lm_eval_name: str
    num_docs: int           # docs evaluated (after the limit)
    higher_is_better: dict[str, bool]
    pool: int = 0           # rows in the task's data file (a local task's; 0: not known)
    docs: tuple[int, ...] | None = None     # the row indices to evaluate, in order (None: the first num_docs)

    @property
    def doc_ids(self) -> list[int]:
        return list(self.docs) if self.docs is not None else list(range(self.num_docs))


def load_yaml(path: str | Path) -> dict:
    from lm_eval.tasks._yaml_loader import load_yaml as lm_load_yaml

    return lm_load_yaml(Path(path), resolve_func=True, recursive=True)


class _DeclLoader(SafeLoader):
    """Reads a task YAML for validation without importing its `!function` hooks."""


_DeclLoader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")


def declared_config(task: Task, root: Path) -> dict:
    """A local task's YAML as declared, its `!function` hooks left unimported."""
    return yaml.load(read_text(root / task.config, shown=task.config), Loader=_DeclLoader)  # noqa: S506


def data_file(name: str, task: Task, model: str | None = None) -> Path:
    """The JSONL a task reads: its local file, the evalsets stage's copy of a public set, or the probe
    set stage probes wrote for `model` with its tokenizer (a probe set has no file without a model)."""
    if probe_sets.is_probe_set(task.data):
        if model is None:
            raise ValueError(f"eval.tasks.{name}: a probe set ({task.data}) is written per model: name the model")
        return paths.probe_data(model, name)
    return paths.eval_data(name) if public_sets.is_public(task.data) else Path(task.data)


def check_files(name: str, task: Task, root: Path) -> None:
    """The task's YAML and (local) data file exist; a registry task's name exists and its data is
    reachable offline."""
    if task.kind == "lm_eval":
        registry.check(name, task, root)
        return
    for attr in ("config", "data"):
        value = getattr(task, attr)
        if attr == "data" and public_sets.is_public(value):
            public_sets.parse(f"eval.tasks.{name}.data", value)    # offline: the name and options
            continue
        if attr == "data" and probe_sets.is_probe_set(value):
            probe_sets.parse(f"eval.tasks.{name}.data", value)     # written per model by stage probes
            continue
        if not (root / value).is_file():
            raise ConfigError(f"eval.tasks.{name}.{attr}: file not found: {value}")


def check_data(name: str, task: Task, root: Path, path: Path | None = None) -> int | None:
    """Validate a task's rows against its template and labels, before any model is loaded.
    `path` defaults to the task's local file; a public set (no path given) is checked by the
    evalsets stage once fetched, so this returns None for it. Errors name the file and line."""
    if task.kind == "lm_eval":
        return None
    if path is None:
        if public_sets.is_public(task.data) or probe_sets.is_probe_set(task.data):
            return None
        path = Path(task.data)
    cfg = declared_config(task, root)
    check_languages(name, task, cfg)
    canonical = [f for f in template_fields(cfg) if not (task.kind == "classify" and f in ("gold", "choices"))]
    rows = read_jsonl(path, root=root)
    check_rows(name, task, rows, field_map(task, canonical), path)
    return len(rows)


def declared_metrics(task: Task, root: Path) -> list[str]:
    """The metrics a task's YAML declares in its metric_list, read without importing its hooks (a
    registry task: from lm-eval's task index)."""
    if task.kind == "lm_eval":
        return registry.declared_metrics(registry.entry("?", task, root).cfg)
    cfg = declared_config(task, root)
    return [m["metric"] for m in cfg.get("metric_list", [])]


def longest_prompt(task: Task, root: Path) -> tuple[int, int] | None:
    """(the longest prompt in tokens its rows state, the task's max_gen_toks) for a local task whose every
    row states `target_tokens` (the retrieval suite, retrieval.write_jsonl), else None: other prompts'
    lengths are known only to a tokenizer."""
    if task.kind == "lm_eval" or public_sets.is_public(task.data):
        return None
    if probe_sets.is_probe_set(task.data):      # written to measure exactly this in each model's tokenizer
        spec = probe_sets.parse("eval.tasks.<task>.data", task.data)     # check_files named the task
        return spec.tokens, max_gen_toks(declared_config(task, root))
    stated = [r.get("target_tokens") for r in read_jsonl(task.data, root=root)]
    if not stated or not all(isinstance(n, int) for n in stated):
        return None
    return max(stated), max_gen_toks(declared_config(task, root))


def max_gen_toks(cfg: dict) -> int:
    return int((cfg.get("generation_kwargs") or {}).get("max_gen_toks", 256))


def planned_samples(task: Task, root: Path) -> int | None:
    """Samples an evaluate run will score: the limit, capped by a local file's rows. None for a public
    set or registry task without a limit (its size is known once its data is loaded)."""
    if task.kind == "lm_eval" or public_sets.is_public(task.data):
        return task.limit
    if probe_sets.is_probe_set(task.data):
        rows = probe_sets.parse("eval.tasks.<task>.data", task.data).samples
        return rows if task.limit is None else min(task.limit, rows)
    rows = len(read_jsonl(task.data, root=root))
    return rows if task.limit is None else min(task.limit, rows)


def template_fields(cfg: dict) -> list[str]:
    """Canonical fields the prompt and target templates read."""
    names: list[str] = []
    for key in ("doc_to_text", "doc_to_target"):
        value = cfg.get(key)
        if isinstance(value, str):
            names += [n for n in _VAR.findall(value) if n not in names and n not in LANGUAGE_VARS]
    return names


PROMPT_KEYS = ("doc_to_text", "gen_prefix")     # the prompt and the cue its answer follows


def in_prompt_format(cfg: dict, chat: bool) -> dict:
    """The config as a model of this prompt format is asked it: a base model's prompt ends with its cue
    (`gen_prefix`); a chat template opens the answer's turn itself (docs/tasks.md "Generation prompts")."""
    if not chat or not isinstance(cfg, dict) or "gen_prefix" not in cfg:
        return cfg
    return {k: v for k, v in cfg.items() if k != "gen_prefix"}


def language_vars(cfg: dict) -> list[str]:
    """The language placeholders the prompt template and its cue use."""
    return [n for key in PROMPT_KEYS if isinstance(cfg.get(key), str)
            for n in _VAR.findall(cfg[key]) if n in LANGUAGE_VARS]


def check_languages(name: str, task: Task, cfg: dict) -> None:
    """A prompt naming {{source_language}}/{{target_language}} needs the entry's `languages`, and
    `languages` on a prompt that names none would be silently ignored."""
    used = language_vars(cfg)
    if used and task.languages is None:
        raise ConfigError(f"eval.tasks.{name}.languages: required: the prompt in {task.config} names "
                          + " and ".join("{{" + v + "}}" for v in dict.fromkeys(used))
                          + " (e.g. languages: {source: English, target: German})")
    if task.languages is not None and not used:
        raise ConfigError(f"eval.tasks.{name}.languages: the prompt in {task.config} uses neither "
                          "{{source_language}} nor {{target_language}}")


def with_languages(cfg: dict, task: Task) -> dict:
    """The config with the entry's language names written into its prompt template and cue."""
    if task.languages is None:
        return cfg
    def fill(m: re.Match) -> str:
        key = LANGUAGE_VARS.get(m.group(1))
        return getattr(task.languages, key) if key else m.group(0)
    return {**cfg, **{k: _VAR.sub(fill, cfg[k]) for k in PROMPT_KEYS if isinstance(cfg.get(k), str)}}


def field_map(task: Task, canonical: list[str]) -> dict[str, str]:
    return {c: task.fields.get(c, c) for c in canonical}


def normalise(row: dict, mapping: dict[str, str], task: Task, position: int) -> dict:
    """The canonical doc of the row at `position` in its data file."""
    doc = {canon: row[user] for canon, user in mapping.items()}
    doc["id"] = str(row.get("id", ""))
    if task.kind == "classify":
        doc["choices"] = list(task.labels)
        doc["gold"] = task.labels.index(row[task.fields.get("label", "label")])
        doc[POSITION] = position
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


def build(name: str, task: Task, model: str | None = None, shared: bool = False) -> TaskSpec:
    """The lm-eval task for one entry, for `model` (its probe sets are its own). `shared`: another entry
    uses the same YAML, so this one's lm-eval task name gets the entry's name appended (lm-eval needs
    distinct names)."""
    if task.kind == "lm_eval":
        return build_registry(name, task)
    cfg = load_yaml(task.config)
    check_languages(name, task, cfg)
    cfg = with_languages(cfg, task)
    canonical = [f for f in template_fields(cfg) if not (task.kind == "classify" and f in ("gold", "choices"))]
    mapping = field_map(task, canonical)
    path = data_file(name, task, model)
    rows = read_jsonl(path)
    check_rows(name, task, rows, mapping, path)
    n = len(rows) if task.limit is None else min(task.limit, len(rows))

    def process_docs(dataset):
        return dataset.map(lambda row, i: normalise(row, mapping, task, i), with_indices=True,
                           remove_columns=dataset.column_names)

    cfg = dict(cfg)
    if shared:
        cfg["task"] = f"{cfg['task']}__{name}"
    cfg["dataset_path"] = "json"
    cfg["dataset_kwargs"] = {"data_files": {"test": str(path)}}
    cfg["test_split"] = "test"
    cfg["process_docs"] = process_docs
    # a YAML that does not say which way is better: the registry's declared direction
    hib = {m["metric"]: bool(m.get("higher_is_better", metric_registry.get(m["metric"]).higher_is_better))
           for m in cfg.get("metric_list", [])}
    return TaskSpec(name=name, kind=task.kind, config=cfg, lm_eval_name=cfg["task"], num_docs=n,
                    higher_is_better=hib, pool=len(rows))


def build_registry(name: str, task: Task) -> TaskSpec:
    """A task of lm-eval's registry, its dataset loaded (evaluate stage only)."""
    obj = registry.load(name, task)
    docs = len(obj.eval_docs)
    n = docs if task.limit is None else min(task.limit, docs)
    hib = {m: bool(v) for m, v in obj.higher_is_better().items()}
    return TaskSpec(name=name, kind="lm_eval", config=obj, lm_eval_name=task.lm_eval, num_docs=n,
                    higher_is_better=hib)


LOGLIK_OUTPUTS = ("loglikelihood", "loglikelihood_rolling", "multiple_choice")


def is_loglik(spec: TaskSpec) -> bool:
    """The task scores log-likelihoods (prompt log-probs), not generated text."""
    if spec.kind == "classify":
        return True
    cfg = spec.config
    output = cfg.get("output_type") if isinstance(cfg, dict) else (
        getattr(cfg, "OUTPUT_TYPE", None) or getattr(getattr(cfg, "config", None), "output_type", None))
    return output in LOGLIK_OUTPUTS


def build_all(tasks: dict[str, Task], model: str) -> list[TaskSpec]:
    configs = [t.config for t in tasks.values() if t.config]
    return [build(name, t, model, shared=configs.count(t.config) > 1) for name, t in tasks.items()]


def report_only(specs: list[TaskSpec], tolerance: Callable[[str], Tolerance | None]) -> set[str]:
    """The tasks no tolerance gates: no metric of theirs has one (`tolerance`: Params.tolerance), like the
    default retrieval suite. Evaluate runs them to their cap in one look, on a variant that can still
    pass; stage noise leaves them out. Pure."""
    return {s.name for s in specs if all(tolerance(metric_id(s.name, m)) is None for m in s.higher_is_better)}
