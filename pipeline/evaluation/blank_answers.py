"""Answers that open with a blank line, scored as the model gave them, on every backend alike.

A generation task stops at a blank line (`until: ["\\n\\n"]`). lm-eval cuts the reference backend's
text at the first stop string, and a served model (vLLM, an endpoint) matches its stop strings on the
raw text, so a base model that answers after a blank line ("\\n\\nDas ist ...") comes back "" before it
started: every such answer was scored empty. A stop string cannot say "a blank line after some text"
to a server, so the fix is on the way back: each answer that came back blank is asked again, the same
prompt and `max_gen_toks`, greedy, without the stop strings, and cut where the task would have cut it
once its leading whitespace is gone (`first_answer`). Only blank answers are asked again, so a model
that answers at once pays nothing; one that opens with a blank line pays a second request for those
answers, decoded to `max_gen_toks` or end of text (the second request's length budget includes the
blank line's tokens). Which prompts were asked again is returned; evaluate flags those rows
(task_rows.REASKED) and logs their count.

Used by pipeline/evaluation/lm_eval_runner.py (`reasking`); tests/test_blank_answers.py.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

def blank(text: str) -> bool:
    return not text.strip()


def first_answer(text: str, until: Sequence[str]) -> str:
    """`text` without its leading whitespace, cut before the first stop string it then contains, by
    lm-eval's own cut (the one HFLM applies to every answer; vLLM's `stop` cuts the same place)."""
    from lm_eval.models.utils import postprocess_generated_text     # lazy: lm-eval's package imports take seconds
    return postprocess_generated_text(text.lstrip(), list(until), None)


def _stops(request) -> list[str]:
    until = request.args[1].get("until") or []
    return [until] if isinstance(until, str) else list(until)


def _without_stops(request):
    context, kwargs = request.args[0], request.args[1]
    return dataclasses.replace(request, arguments=(context, {**kwargs, "until": []}))


def generate_until(generate: Callable[[list], list[str]], requests: list,
                   asked_again: Callable[[object], None] = lambda r: None) -> list[str]:
    """`generate(requests)`, and each blank answer replaced by `first_answer` of the same request asked
    without its stop strings (one batch); `asked_again(request)` is told each one."""
    stops = [_stops(r) for r in requests]       # before generate: a backend may pop them from the kwargs
    answers = list(generate(requests))
    again = [i for i, a in enumerate(answers) if blank(a)]
    if again:
        texts = generate([_without_stops(requests[i]) for i in again])
        for i, text in zip(again, texts, strict=True):
            answers[i] = first_answer(text, stops[i])
            asked_again(requests[i])
    return answers


def reasking(lm) -> set[tuple[str, str]]:
    """Make `lm.generate_until` ask blank answers again (once per lm object); returns the live set of
    (task name, prompt) asked again, which the caller reads after lm-eval has run."""
    found = getattr(lm, "_qtier_reasked", None)
    if found is None:
        found = set()
        plain = lm.generate_until

        def wrapped(requests, *args, **kwargs):
            return generate_until(lambda reqs: plain(reqs, *args, **kwargs), requests,
                                  lambda r: found.add((r.task_name, r.args[0])))

        lm.generate_until = wrapped
        lm._qtier_reasked = found
    return found
