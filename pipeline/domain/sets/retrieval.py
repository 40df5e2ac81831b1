"""The synthetic long-context retrieval suite (issue 21): prompts of a target length in tokens with one
fact hidden at a stated depth of generated filler, and exact-match scoring of a model's answer. Pure:
no model, no download; the token counter is passed in (a tokenizer's, or a fake one in tests).

    from pipeline.domain.sets import retrieval
    samples = retrieval.suite(["passkey", "niah_single", "niah_multikey"], [1024, 2048], [0.1, 0.5, 0.9],
                              per_cell=2, seed=1234, count_tokens=lambda s: len(tok(s).input_ids))
    retrieval.score(generation, samples[0].answer)     # True / False

Tasks:
  passkey        Mohtashami & Jaggi 2023 (Landmark Attention, sec. 4.2): an instruction, filler repeated,
                 "The pass key is N. Remember it. N is the pass key.", more filler, "What is the pass
                 key? The pass key is". N has 5 digits.
  niah_single    RULER's single needle (Hsieh et al. 2024, niah_single_1): "One of the special magic
                 numbers for <key> is: <7 digits>." in repeated filler, asked for that key.
  niah_multikey  RULER's multi-key needle (niah_multikey_1): `keys` needles with distinct keys and values;
                 the asked key's needle is at the stated depth, the others (distractors) at random depths.

Filler: every sample draws its own block of short sentences ("The lantern is quiet.") from the word
lists below with its own RNG and repeats the block; it has no digits, so a number in an answer can
only come from a needle. Each sample's RNG is seeded with (seed, task, length, depth, index): adding
a length or a depth leaves every other sample unchanged.

Guarantees (tests/test_retrieval.py), with u the token count of the longest filler sentence (about 7):
  length  count_tokens(prompt) <= target, and within u + 2 tokens of it (whole sentences are added
          until the next one would overshoot); where that gap is over 0.5% of the target (a vocabulary
          of single characters), the next sentence's words are added one by one while they fit;
  depth   the needle sits between two filler sentences; the filler tokens before it, as a fraction of
          all filler tokens (each part counted on its own), is within (u + 2) / filler tokens of the
          stated depth (half a sentence from the boundary choice, the rest from the counter's
          boundary effects).
"""
from __future__ import annotations

import bisect
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.io import atomic_write_jsonl

TASKS = ("passkey", "niah_single", "niah_multikey")
TOP_UP = 0.005          # a gap to the target length above this share is filled word by word

_NOUNS = ("grass", "sky", "sun", "river", "stone", "lantern", "garden", "window", "road", "cloud", "forest",
          "harbor", "bridge", "meadow", "candle", "valley", "tower", "kettle", "orchard", "island")
_ADJS = ("green", "blue", "yellow", "quiet", "warm", "old", "bright", "calm", "wide", "soft", "tall", "still")
_VERBS = ("rests", "waits", "shines", "turns", "sleeps", "hums", "drifts", "glows")
_ADVS = ("slowly", "today", "again", "softly", "here", "there", "as always", "for a while")
_KEY_A = ("amber", "brisk", "cobalt", "dusty", "ember", "frosty", "gilded", "hollow", "ivory", "jolly",
          "lunar", "misty", "noble", "olive", "pale", "rusty", "silver", "tidal", "velvet", "woven")
_KEY_B = ("falcon", "otter", "maple", "comet", "thistle", "badger", "harp", "lichen", "marlin", "pebble",
          "quartz", "raven", "sparrow", "tulip", "walrus", "willow", "yarrow", "zephyr", "heron", "acorn")

_PASSKEY_INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
                  "it. I will quiz you about the important information there.")
_NIAH_INTRO = ("Some special magic numbers are hidden within the following text. Make sure to memorize "
               "them. I will quiz you about the numbers afterwards.")


@dataclass(frozen=True)
class Sample:
    task: str
    target_tokens: int
    depth: float            # stated: fraction of the filler before the asked needle
    index: int              # repetition within (task, length, depth)
    prompt: str
    answer: str
    tokens: int             # count_tokens(prompt)
    needle_depth: float     # measured, as the module docstring defines it
    key: str | None = None  # the asked key (niah_*)

    @property
    def id(self) -> str:
        return f"{self.task}-{self.target_tokens}-{self.depth:g}-{self.index}"

    def as_dict(self) -> dict:
        return {"id": self.id, **asdict(self)}


_ID = re.compile(r"^(" + "|".join(TASKS) + r")-(\d+)-([0-9.e+-]+)-(\d+)$")


def parse_id(sample_id: object) -> tuple[str, int] | None:
    """(task, target length) from a Sample.id, else None: an evaluated row keeps its id but only the
    fields its task's templates read (prompt, answer)."""
    m = _ID.match(sample_id) if isinstance(sample_id, str) else None
    return (m.group(1), int(m.group(2))) if m else None


def filler_block(rng: random.Random, sentences: int = 12) -> list[str]:
    """`sentences` short generated sentences, no digits, no two alike in a row."""
    out: list[str] = []
    while len(out) < sentences:
        noun = rng.choice(_NOUNS)
        s = (f"The {noun} is {rng.choice(_ADJS)}." if rng.random() < 0.6
             else f"The {noun} {rng.choice(_VERBS)} {rng.choice(_ADVS)}.")
        if not out or s != out[-1]:
            out.append(s)
    return out


def _keys(rng: random.Random, n: int) -> list[str]:
    pairs = rng.sample([(a, b) for a in _KEY_A for b in _KEY_B], n)
    return [f"{a}-{b}" for a, b in pairs]


def _distinct_numbers(rng: random.Random, n: int, digits: int) -> list[str]:
    return [str(v) for v in rng.sample(range(10 ** (digits - 1), 10 ** digits), n)]


def _boundary(cum: Sequence[int], depth: float) -> int:
    """The sentence boundary (i: i sentences before it) whose token fraction cum[i] / cum[-1] is nearest
    depth; the earlier one on a tie. cum is non-decreasing, cum[0] == 0."""
    goal = depth * cum[-1]
    i = bisect.bisect_left(cum, goal)
    if i == len(cum):
        return i - 1
    return i - 1 if i > 0 and goal - cum[i - 1] <= cum[i] - goal else i


def _assemble(intro: str, units: list[str], inserts: dict[int, list[str]], question: str) -> str:
    """The prompt: intro, units joined by spaces with inserts[i] placed before unit i (i == len(units):
    after the last), question."""
    parts = [intro]
    for i in range(len(units) + 1):
        parts += inserts.get(i, [])
        if i < len(units):
            parts.append(units[i])
    parts.append(question)
    return " ".join(parts)


def _build(task: str, target: int, depth: float, index: int, seed: int, count: Callable[[str], int],
           keys: int, sentences: int) -> Sample:
    rng = random.Random(f"{seed}/{task}/{target}/{depth!r}/{index}")
    block = filler_block(rng, sentences)
    unit_tokens = [count(s) for s in block]
    key = None
    if task == "passkey":
        answer = _distinct_numbers(rng, 1, 5)[0]
        intro, question = _PASSKEY_INTRO, "What is the pass key? The pass key is"
        needles = [f"The pass key is {answer}. Remember it. {answer} is the pass key."]
    else:
        n = 1 if task == "niah_single" else keys
        names, values = _keys(rng, n), _distinct_numbers(rng, n, 7)
        key, answer = names[0], values[0]
        intro = _NIAH_INTRO
        question = (f"What is the special magic number for {key} mentioned in the provided text? "
                    f"The special magic number for {key} mentioned in the provided text is")
        needles = [f"One of the special magic numbers for {k} is: {v}." for k, v in zip(names, values)]
    others = [rng.random() for _ in needles[1:]]      # distractor depths, drawn before the length search

    def make(n_units: int, tail: Sequence[str] = ()) -> tuple[str, int, list[str], list[str]]:
        units = [block[i % len(block)] for i in range(n_units)]
        cum = [0]
        for i in range(n_units):
            cum.append(cum[-1] + unit_tokens[i % len(block)])
        at = _boundary(cum, depth)
        inserts: dict[int, list[str]] = {at: [needles[0]]}
        for d, needle in zip(others, needles[1:]):
            inserts.setdefault(_boundary(cum, d), []).append(needle)
        if tail:    # the top-up's words end the filler: a needle at the very end stays after them
            units.append(" ".join(tail))
            inserts = {(i + 1 if i == n_units else i): v for i, v in inserts.items()}
            at = at + 1 if at == n_units else at
        return _assemble(intro, units, inserts, question), at, units[:at], units[at:]

    def tokens(n_units: int) -> int:
        return count(make(n_units)[0])

    bare = tokens(0)
    if bare > target:
        raise ValueError(f"retrieval: {task} needs {bare} tokens without any filler, more than the "
                         f"target length {target}")
    # start near the answer (sentences add about their own count), grow, then bisect, keeping
    # tokens(lo) <= target < tokens(hi)
    lo = int(0.95 * (target - bare) * len(block) / max(1, sum(unit_tokens)))
    if tokens(lo) > target:
        lo = 0
    step = max(1, lo // 50)
    hi = lo + step
    while tokens(hi) <= target:
        lo, hi, step = hi, hi + 2 * step, 2 * step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if tokens(mid) <= target else (lo, mid)
    # a vocabulary fine in characters (a token a character) can leave most of a sentence unused: top up
    # word by word from the next sentence while the gap is over TOP_UP of the target (the default
    # model's tokenizer leaves at most 0.2%, so its sets are whole sentences)
    tail: list[str] = []
    if target - tokens(lo) > TOP_UP * target:
        for word in block[lo % len(block)].split():
            if count(make(lo, [*tail, word])[0]) > target:
                break
            tail.append(word)
    prompt, _, before, after = make(lo, tail)
    b, a = (count(" ".join(x)) if x else 0 for x in (before, after))
    return Sample(task, target, depth, index, prompt, answer, count(prompt),
                  b / (a + b) if a + b else depth, key)


def suite(tasks: Sequence[str], lengths: Sequence[int], depths: Sequence[float], per_cell: int, seed: int,
          count_tokens: Callable[[str], int], keys: int = 4, sentences: int = 12) -> list[Sample]:
    """Every (task, length, depth) cell `per_cell` times, in that order. `keys`: needles of niah_multikey
    (the asked one and keys - 1 distractors); `sentences`: filler block size before it repeats."""
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise ValueError(f"retrieval: unknown task {bad[0]!r} (known: {', '.join(TASKS)})")
    if any(not 0.0 <= d <= 1.0 for d in depths):
        raise ValueError(f"retrieval: depths must be in [0, 1], got {list(depths)}")
    if any(n < 1 for n in lengths) or per_cell < 1 or keys < 2 or sentences < 1:
        raise ValueError(f"retrieval: lengths, per_cell and sentences must be positive and keys >= 2 "
                         f"(got {list(lengths)}, {per_cell}, {sentences}, {keys})")
    return [_build(t, n, d, i, seed, count_tokens, keys, sentences)
            for t in tasks for n in lengths for d in depths for i in range(per_cell)]


_NUMBER = re.compile(r"\d+")


def extract(generation: str) -> str | None:
    """The first maximal run of digits in the generation (None: there is none). A model that lists
    several numbers is judged on its first, so reciting every needle of niah_multikey does not score."""
    m = _NUMBER.search(generation)
    return m.group(0) if m else None


def score(generation: str, answer: str) -> bool:
    """Exact match: the generation's first number is the answer, digit for digit ("71432." and "The pass
    key is 71432" match 71432; "7143", "714320", "71,432" and "12345 or 71432" do not)."""
    return extract(generation) == answer


def write_jsonl(samples: Sequence[Sample], path: str | Path) -> None:
    """The suite as task data for eval_sets/tasks/retrieval.yaml (fields prompt, answer; the rest for
    the per-sample logs): one file per length, so that each length is judged as a task."""
    atomic_write_jsonl(path, [s.as_dict() for s in samples])
