"""The long natural texts of the fidelity-by-position probe (issue 21; eval_sets/long_texts.jsonl,
written for this repository): rows of a JSONL file, each cut to the probe's length in the model's own
tokens. Pure: the tokenizer is passed in.

    rows = long_texts.texts("eval_sets/long_texts.jsonl", "text", 3)
    seqs = long_texts.sequences(rows, 3, encode, long_texts.probe_positions(4096, context, 4096))

The first `limit` rows are the probe's texts. The same characters are fewer tokens in a larger
vocabulary (the shipped texts are 4,126-4,432 tokens for SmolLM2's 49,152, about 4,000 at 4.5
characters a token), so a text with fewer tokens than the probe reads is continued, after a blank line,
with the file's next rows (wrapping round), each whole, until it has enough (`joined`). The tokens are
those of the joined string, so the break is tokenized as any paragraph break is, with no BOS inside;
each text's `starts` say at which position a continuation begins (stage probes writes them): the
positions after it read a second document with the first one in context, which a KL against the
baseline on the same tokens measures as well as any other. A text that all the rows joined cannot
bring to the length is a DataError naming it: stage probes@<model> raises it with the model's own
tokenizer, before any quantization (dvc.yaml), not fidelity_base after the baseline is quantized.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.io import DataError, read_jsonl

SEPARATOR = "\n\n"      # between joined texts: a paragraph break, the tokenizer's own tokens for it


@dataclass(frozen=True)
class Joined:
    """One probe text in one tokenizer: the rows read in order (the text itself, then any continuation),
    the token position at which each begins, and the first `need` tokens of their joined string."""
    ids: tuple[str, ...]
    starts: tuple[int, ...]
    tokens: list[int]
    own: int                    # the tokens of the text alone

    def record(self) -> dict:
        """What stage probes writes of it (no token ids)."""
        return {"tokens_alone": self.own, "rows": list(self.ids), "starts": list(self.starts)}


def texts(data: str, field: str, limit: int, root: Path | None = None) -> list[tuple[str, str]]:
    """(id, text) of every row (id: the row's `id`, else its line number); the first `limit` are the
    probe's texts, all of them the continuations a short one may need."""
    rows = read_jsonl(data, (field,), root)
    if len(rows) < limit:
        raise DataError(f"{data}: {limit} long texts requested but the file has {len(rows)} rows")
    return [(str(r.get("id", i + 1)), str(r[field])) for i, r in enumerate(rows)]


def probe_positions(wanted: int, context: int | None, max_model_len: int, engine_len: int | None = None) -> int:
    """Positions read per text: eval.long_context.positions, at most the model's context,
    memory.max_model_len and, on vLLM, what its --max-model-len leaves for the text and the one token
    it generates after it (`engine_len`: serving.vllm.max_model_len - 2)."""
    return min(n for n in (wanted, context, max_model_len, engine_len) if n)


def join(rows: Sequence[tuple[str, str]], i: int, encode: Callable[[str], list[int]], need: int) -> Joined:
    """Row i's text with at least `need` tokens: alone when it has them, else continued with the next
    rows (module docstring); a DataError naming the text when all the rows joined fall short."""
    text, ids, starts, used, own = "", [], [], [], 0
    for j in range(len(rows)):
        rid, piece = rows[(i + j) % len(rows)]
        if used:
            starts.append(len(encode(text + SEPARATOR)))
            text += SEPARATOR + piece
        else:
            starts.append(0)
            text = piece
        used.append(rid)
        ids = list(encode(text))
        own = own or len(ids)
        if len(ids) >= need:
            return Joined(tuple(used), tuple(starts), ids[:need], own)
    raise DataError(f"long text {rows[i][0]}: {own} tokens, {len(ids)} with all {len(rows)} texts joined; the "
                    f"probe needs {need} (positions up to {need - 1}): lower eval.long_context.positions or add texts")


def joined(rows: Sequence[tuple[str, str]], limit: int, encode: Callable[[str], list[int]],
           positions: int) -> list[Joined]:
    """The first `limit` texts, each with positions + 1 tokens (teacher forcing reads `positions` of
    them, predicting the next at each)."""
    return [join(rows, i, encode, positions + 1) for i in range(limit)]


def sequences(rows: Sequence[tuple[str, str]], limit: int, encode: Callable[[str], list[int]],
              positions: int) -> list[list[int]]:
    """joined()'s token ids, what the probe reads."""
    return [j.tokens for j in joined(rows, limit, encode, positions)]
