"""The baseline's sanity, read before any variant is judged against it: generations that loop or come
back empty, and choice tasks scored at chance, each reported with its likely causes. A broken prompt
format (chat template, BOS), a tokenizer mismatch or a server without prompt log-probs all look like
this, and every variant judged against such a baseline inherits it. Pure.

    from pipeline.scoring.estimators import sanity; sanity.findings(baseline_samples_by_task)
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.domain.sets.loops import loop_unit
from pipeline.domain.sets.sample_row import SampleRow

# a finding needs this share of a task's samples (a few loops in a long run are the model's own)
MIN_RATE = 0.25
ALPHA = 0.05        # one-sided binomial test of accuracy above chance
CAUSES = {
    "loops": "prompt format (chat template on or off, BOS), a tokenizer that is not the model's, or "
             "greedy decoding of a model too small for the task",
    # not the stop string: an answer that opens with a blank line is asked again without it
    # (evaluation/blank_answers.py), so an empty one is what the model wrote
    "empty": "the model ends its answer at once (end of text: an instruct model asked without its chat "
             "template, or a prompt it reads as finished), or spends max_gen_toks on whitespace",
    "chance": "prompt format (chat template, BOS), a tokenizer mismatch, or log-probs the engine did not "
              "return (a server without prompt log-probs scores every choice alike)",
}


@dataclass(frozen=True)
class Finding:
    task: str
    kind: str            # loops | empty | chance
    what: str            # e.g. "12 of 32 generations loop (e.g. '1 1 1 1')"

    @property
    def causes(self) -> str:
        return CAUSES[self.kind]


def above_chance_p(correct: int, n: int, chance: float) -> float:
    """P(X >= correct) for X ~ Binomial(n, chance): the one-sided p-value of "better than chance".
    scipy's survival function: a sum of comb(n, k) as floats overflowed past n of about 1,030."""
    from scipy.stats import binom   # lazy: scipy takes a second to import

    return float(binom.sf(correct - 1, n, chance))


def generation_findings(task: str, rows: list[SampleRow]) -> list[Finding]:
    outputs = [r.output for r in rows if isinstance(r.output, str)]
    if not outputs:
        return []
    found = []
    looping = [(o, u) for o in outputs if (u := loop_unit(o))]
    if len(looping) >= MIN_RATE * len(outputs):
        found.append(Finding(task, "loops", f"{len(looping)} of {len(outputs)} generations loop "
                                            f"(e.g. {looping[0][1]!r} repeated)"))
    empty = sum(1 for o in outputs if not o.strip())
    if empty >= MIN_RATE * len(outputs):
        found.append(Finding(task, "empty", f"{empty} of {len(outputs)} generations are empty"))
    return found


def choice_findings(task: str, rows: list[SampleRow]) -> list[Finding]:
    scored = [r for r in rows if r.pred is not None and r.gold is not None and r.choices]
    if not scored:
        return []
    correct = sum(1 for r in scored if r.pred == r.gold)
    chance = sum(1 / len(r.choices) for r in scored) / len(scored)
    p = above_chance_p(correct, len(scored), chance)
    if p <= ALPHA:
        return []
    tied = sum(1 for r in scored if len(set(r.logliks or [])) == 1)
    ties = f"; {tied} with every choice's log-likelihood equal" if tied else ""
    return [Finding(task, "chance", f"accuracy {correct}/{len(scored)} is not above chance ({chance:.0%}; "
                                    f"one-sided binomial p = {p:.2f}){ties}")]


def findings(samples: dict[str, list[SampleRow]]) -> list[Finding]:
    """Every finding on the baseline's per-sample rows (task -> rows, as evaluate wrote them)."""
    out: list[Finding] = []
    for task, rows in samples.items():
        out += choice_findings(task, rows) + generation_findings(task, rows)
    return out
