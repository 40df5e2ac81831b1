"""Probe sets made per model: a task whose `data` is `retrieval:<tokens>` reads the synthetic retrieval
suite (pipeline/domain/sets/retrieval.py) written for each model with its own tokenizer by stage probes, so
"1,024 tokens" is 1,024 tokens of that model's prompt, whatever its vocabulary. Pure: parsing and
sizes; the stage writes the files.

    eval.tasks.retrieval_1024: {kind: generate, config: eval_sets/tasks/retrieval.yaml, data: "retrieval:1024"}
    data: "retrieval:2048?tasks=niah_single,passkey&depths=0.1,0.5,0.9&per_cell=2&seed=1234"

Defaults: the niah_single task, depths 0.1/0.5/0.9, one prompt per depth, seed 1234.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from pipeline.domain.sets import retrieval
from pipeline.schema import ConfigError

SCHEME = "retrieval"
OPTIONS = ("tasks", "depths", "per_cell", "seed")
# what a chat template adds around a prompt (SmolLM2's: 20 tokens with its system message)
CHAT_TOKENS = 64


@dataclass(frozen=True)
class ProbeSet:
    tokens: int                                   # each prompt's length in the model's tokens
    tasks: tuple[str, ...] = ("niah_single",)
    depths: tuple[float, ...] = (0.1, 0.5, 0.9)
    per_cell: int = 1
    seed: int = 1234

    @property
    def samples(self) -> int:
        return len(self.tasks) * len(self.depths) * self.per_cell


def is_probe_set(data: str | None) -> bool:
    return data is not None and data.partition(":")[0] == SCHEME


def parse(key: str, data: str) -> ProbeSet:
    """`retrieval:<tokens>[?option=value&...]`; an error names the key and the value."""
    scheme, _, rest = data.partition(":")
    tokens, _, query = rest.partition("?")
    if scheme != SCHEME or not tokens.isdigit() or int(tokens) < 64:
        raise ConfigError(f"{key}: {data!r}: expected retrieval:<tokens> with at least 64 tokens, e.g. retrieval:1024")
    found = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in OPTIONS:
            raise ConfigError(f"{key}: {data!r}: unknown option {name!r} (options: {', '.join(OPTIONS)})")
        try:
            found[name] = (tuple(value.split(",")) if name == "tasks" else
                           tuple(float(d) for d in value.split(",")) if name == "depths" else int(value))
        except ValueError:
            raise ConfigError(f"{key}: {data!r}: option {name} {value!r} is not a number") from None
    spec = ProbeSet(int(tokens), **found)
    try:    # the suite's own checks (tasks, depths, counts), on a fake counter: no tokenizer here
        retrieval.suite(spec.tasks, [spec.tokens], spec.depths, 1, spec.seed, lambda s: len(s.split()))
    except ValueError as e:
        raise ConfigError(f"{key}: {data!r}: {e}") from None
    if spec.per_cell < 1:
        raise ConfigError(f"{key}: {data!r}: per_cell must be at least 1")
    return spec


def rows(spec: ProbeSet, count_tokens) -> list[retrieval.Sample]:
    """The set's prompts for one tokenizer (`count_tokens`: text -> its token count, no special tokens)."""
    return retrieval.suite(spec.tasks, [spec.tokens], spec.depths, spec.per_cell, spec.seed, count_tokens)


def room(context: int | None, backend: str, max_model_len: int) -> tuple[int | None, str]:
    """(the most tokens a prompt, its answer and a chat template may take, what sets it): the model's
    context, and on an engine other than the reference vLLM's --max-model-len."""
    limits = [(context, "the model's context (max_position_embeddings)")] if context else []
    if backend != "reference":
        limits.append((max_model_len, "serving.vllm.max_model_len"))
    return min(limits, default=(None, ""))


def misfit(name: str, spec: ProbeSet, answer: int, limit: int | None, what: str) -> str | None:
    """Why the set's prompts, answers and a chat template do not fit `limit`, or None."""
    need = spec.tokens + answer + CHAT_TOKENS
    if limit is None or need <= limit:
        return None
    return (f"eval.tasks.{name}.data: retrieval:{spec.tokens} needs {need:,} tokens ({spec.tokens:,}-token prompts, "
            f"{answer} answer tokens and a chat template) and {what} is {limit:,}: lower the length or drop the task")
