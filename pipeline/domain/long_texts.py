"""The long natural texts of the fidelity-by-position probe (issue 21; eval_sets/long_texts.jsonl,
written for this repository): rows of a JSONL file in file order, each cut to the probe's length in
tokens. Pure: the tokenizer is passed in.

    seqs = long_texts.sequences(long_texts.texts("eval_sets/long_texts.jsonl", "text", 4), encode, 4096)

A text shorter than the probe is an error, not a shorter row: the last bucket's per-text means would
silently come from fewer texts than asked for.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.io import DataError, read_jsonl


def texts(data: str, field: str, limit: int, root: Path | None = None) -> list[tuple[str, str]]:
    """(id, text) of the first `limit` rows (id: the row's `id`, else its line number)."""
    rows = read_jsonl(data, (field,), root)
    if len(rows) < limit:
        raise DataError(f"{data}: {limit} long texts requested but the file has {len(rows)} rows")
    return [(str(r.get("id", i + 1)), str(r[field])) for i, r in enumerate(rows[:limit])]


def sequences(rows: Sequence[tuple[str, str]], encode: Callable[[str], list[int]], positions: int) -> list[list[int]]:
    """Each text's first positions + 1 tokens (teacher forcing reads `positions` of them, predicting
    the next at each); a text with fewer tokens is a DataError naming it."""
    out = []
    for rid, text in rows:
        ids = list(encode(text))
        if len(ids) < positions + 1:
            raise DataError(f"long text {rid}: {len(ids)} tokens, the probe needs {positions + 1} "
                            f"(positions up to {positions}); lower the length or use longer texts")
        out.append(ids[:positions + 1])
    return out
