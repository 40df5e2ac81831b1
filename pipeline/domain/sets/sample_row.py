"""One document's per-sample row: what evaluate writes to <variant>/samples/<task>.jsonl and the sample
cache keeps, and what decide's path reads (intervals, flips, sanity, regressions, KV by length), typed
once here. Read and written through the one parser (schema/typed.py): a row on disk is `typed.plain` of
its SampleRow, fields in this order and those at their default left out, so the JSONL evaluate wrote
before the type existed reads back and writes out byte for byte (tests/test_sample_row.py).

    rows = sample_row.read(path)              # list[SampleRow]; a bad row: one line naming file:line.field
    sample_row.partial(target="Cats run.", output="Cats run home.")    # only what a score reads
    sample_row.write(path, rows)
    row.scores["acc"], row.output, row.stratum

A local choice task's row has choices/gold/logliks/pred/tied, a generated one output (and `reasked`
where its answer was asked again: evaluation/blank_answers.py), a registry task's (lm_eval) output and
`lm_eval`; each row of a task read in strata carries its stratum and the pool's strata
(evaluation/stratified.py). Per-metric scores stay a mapping (metric name -> score on 0-100), the names
metric_registry declares: a task reports the metrics its YAML names.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import io
from pipeline.schema import typed
from pipeline.schema.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class SampleRow:
    id: str                                  # the document's own id ("" for a registry task)
    doc_id: int                              # its index in the task's data: the pairing key
    input: dict[str, Any]                    # the document's fields the prompt was built from
    target: str | int | None
    choices: list[str] | None = None         # a choice task's labels, gold's and pred's index into them
    gold: int | None = None
    logliks: list[float] | None = None       # per choice
    pred: int | None = None
    tied: bool | None = None                 # its top log-likelihoods tied (metrics.choose broke it)
    output: str | None = None                # a generated answer (a registry task's: its text)
    reasked: bool = False                    # the answer opened with a blank line and is the second request's
    prompt_chars: int | None                 # None: lm-eval logged no prompt
    lm_eval: bool = False                    # a registry task's row (registry.sample_row)
    scores: dict[str, float]                 # metric -> per-sample score (written even when empty)
    stratum: int | None = None               # read in strata: 0 below the margin (read in full) or 1
    strata: list[int] | None = None          # the pool's items per stratum


# a row's fields that only say where it came from, at no document: what `partial` fills in
NO_DOCUMENT = {"id": "", "doc_id": 0, "input": {}, "target": None, "prompt_chars": None, "scores": {}}


def partial(**fields: Any) -> SampleRow:
    """A row of only the fields a score reads (the task YAML's hooks score lm-eval's documents with
    metric_registry: eval_sets/tasks/qtier_hooks.py), the others at NO_DOCUMENT."""
    return SampleRow(**{**NO_DOCUMENT, **fields})


def of(data: dict, where: str) -> SampleRow:
    """A row from its JSON object; a mismatch is one ConfigError starting `<where>.<field>`."""
    return typed.build(SampleRow, data, where)


def plain(row: SampleRow) -> dict:
    return typed.plain(row)


def read(path: Path) -> list[SampleRow]:
    """The rows of one samples/<task>.jsonl; a malformed row is one line naming the file, line and field."""
    try:
        return [of(r, f"{path}:{n}") for n, r in enumerate(io.read_jsonl(path), 1)]
    except ConfigError as e:
        raise io.DataError(str(e)) from None


def write(path: Path, rows: list[SampleRow]) -> None:
    io.atomic_write_jsonl(path, [plain(r) for r in rows])


def untagged(row: SampleRow) -> SampleRow:
    """The row without its strata (a pair across models shares no design: scoring/verdict/across.py)."""
    return dataclasses.replace(row, stratum=None, strata=None)
