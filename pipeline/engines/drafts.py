"""Drafts for greedy generation: what another run generated from the same prompt, checked by the model
in one prefill so that decoding starts where the two part (speculative decoding with a free draft).

A variant's summaries mostly begin as the baseline's do (fp16 + fp8 KV on the default run: 46% of its
summary tokens are a shared prefix of the baseline's; the float32 check's are 51% of the variant's own
bfloat16 output). generate.greedy prefills prompt + draft in one forward pass, keeps the draft tokens
the model's own argmax confirms, appends the model's first token that differs, and decodes from there.
Every returned token is the model's own greedy choice given the tokens before it, so the text is the
one greedy decoding gives, float rounding of other kernel shapes aside (as for any batch shape;
tests/test_drafts.py compares the two on a tiny model). A draft changes only how long it takes.

Where drafts come from (one process-wide STORE, keyed by the prompt's token ids, once a stage calls
`start`): every greedy generation records its output, so the second arithmetic's check reads the variant's own first
outputs; stage baseline writes what it generated (results/baseline/<model>/drafts.jsonl) and
stage evaluate loads it before a variant's tasks. A task read from the sample cache records nothing:
its variants then decode in full, with the same text.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Iterable

FILE = "drafts.jsonl"


def key(prompt: Iterable[int]) -> str:
    return hashlib.sha256(json.dumps([int(t) for t in prompt]).encode()).hexdigest()[:32]


class Drafts:
    """prompt token ids -> the token ids a greedy generation produced after it."""

    def __init__(self):
        self.by_prompt: dict[str, list[int]] = {}
        self.tokens = self.confirmed = 0     # tokens generated, and of them taken from a draft

    def counts(self) -> dict[str, int]:
        return {"drafts": len(self.by_prompt), "tokens": self.tokens, "from_drafts": self.confirmed}

    def get(self, prompt: Iterable[int]) -> list[int]:
        return self.by_prompt.get(key(prompt), [])

    def remember(self, prompt: Iterable[int], tokens: list[int]) -> None:
        if tokens:
            self.by_prompt[key(prompt)] = [int(t) for t in tokens]

    def dump(self, path: Path) -> None:
        rows = [json.dumps({"prompt": k, "tokens": v}) for k, v in sorted(self.by_prompt.items())]
        path.write_text("".join(r + "\n" for r in rows))

    def load(self, path: Path) -> int:
        """Adds the drafts a dump wrote (none: no file); returns how many."""
        if not path.is_file():
            return 0
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for r in rows:
            self.by_prompt.setdefault(r["prompt"], r["tokens"])
        return len(rows)

    def clear(self) -> None:
        self.by_prompt.clear()
        self.tokens = self.confirmed = 0


# the process's drafts once a stage starts them (baseline, evaluate); None: plain decoding, so a benchmark
# timing two paths in one process does not time the second against the first's outputs
STORE: Drafts | None = None


def start() -> Drafts:
    """The process's drafts from now on: every greedy generation of the reference backend reads and
    records them."""
    global STORE
    STORE = STORE or Drafts()
    return STORE


def confirmed(draft: list[int], argmax: list[int], budget: int, ends: Callable[[list[int]], bool]) -> tuple[list[int], bool]:
    """The tokens greedy decoding emits first, read off one prefill of prompt + draft: argmax[j] is the
    model's choice after prompt + draft[:j] (len(draft) + 1 of them). Draft tokens are taken while the
    model chooses them; the first choice that differs is taken too and ends the walk (the tokens after
    it were conditioned on the draft, not on it). `ends(tokens)`: the row stops there (eos, a stop
    string); `budget`: at most that many tokens. Returns (tokens, whether the row is done). Pure."""
    tokens: list[int] = []
    for j, choice in enumerate(argmax[:len(draft) + 1]):
        tokens.append(int(choice))
        if ends(tokens) or len(tokens) >= budget:
            return tokens, True
        if j >= len(draft) or int(choice) != int(draft[j]):
            break
    return tokens, False
