"""The backend interface every serving engine implements, and the variant it serves."""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline import paths
from pipeline.domain.model import bos, chat
from pipeline.domain.result import serving_record
from pipeline.domain.result.serving_record import ServingRecord
from pipeline.schema import KvMode, Model, Params, Tier, replaced


@dataclass(frozen=True)
class Variant:
    model: str
    tier: str
    kv: str
    checkpoint: Path
    model_cfg: Model
    tier_cfg: Tier
    kv_cfg: KvMode
    serve_path: Path                        # what the engine loads (quantize's record says which)
    load_quantization: dict[str, bool | str | float | list[str]] | None = None   # bitsandbytes options applied at load
    out_dir: Path | None = None             # the evaluate stage's own folder, for server logs and bench files

    def __post_init__(self) -> None:
        if self.model_cfg.dtype == "auto":     # an engine needs the concrete dtype (Variant.of resolves it)
            raise ValueError(f"variant {self.model}/{self.tier}/{self.kv}: models.{self.model}.dtype is "
                             "still auto (build it with Variant.of, from quantize's record)")
        if not isinstance(self.model_cfg.apply_chat_template, bool):     # the prompts' format, as prepare resolved it
            raise ValueError(f"variant {self.model}/{self.tier}/{self.kv}: models.{self.model}.apply_chat_template "
                             "is still auto (build it with Variant.of, from prepare's record)")
        if not isinstance(self.model_cfg.add_bos_token, bool):
            raise ValueError(f"variant {self.model}/{self.tier}/{self.kv}: models.{self.model}.add_bos_token "
                             "is still auto (build it with Variant.of, from prepare's record)")

    @property
    def chat(self) -> bool:
        """Prompts are wrapped in the model's chat template (models.<name>.apply_chat_template, resolved)."""
        return self.model_cfg.apply_chat_template

    @property
    def add_bos(self) -> bool:
        """Prompts start with the tokenizer's BOS token (models.<name>.add_bos_token, resolved)."""
        return self.model_cfg.add_bos_token

    @property
    def key(self) -> str:
        return f"{self.model}-{self.tier}-{self.kv}"

    @classmethod
    def of(cls, params: Params, model: str, tier: str, kv: str, checkpoint: Path, record: ServingRecord,
           out_dir: Path | None = None) -> Variant:
        """The variant as quantize's record describes its checkpoint; models.<name>.dtype `auto` as
        quantize resolved it from the source's config.json (the record's storage_dtype), and
        models.<name>.apply_chat_template and add_bos_token as prepare resolved them (the source's record,
        for every value: what prepare checked against the tokenizer, never the param again)."""
        model_cfg = replaced(params.models[model], apply_chat_template=chat.recorded(model),
                             add_bos_token=bos.recorded(model))
        if model_cfg.dtype == "auto":
            model_cfg = replaced(model_cfg, dtype=record.storage_dtype)
        if not record.ok or record.serve_path is None:
            raise Unsupported(f"{model}/{tier} has no checkpoint: {record.reason}")
        return cls(model, tier, kv, checkpoint, model_cfg, params.tiers[tier], params.kv_modes[kv],
                   serve_path=Path(record.serve_path), load_quantization=record.load_quantization,
                   out_dir=out_dir)


def baseline_variant(params: Params, model: str, out_dir: Path | None = None) -> Variant:
    """The decision's baseline of `model` as quantize recorded it; Unsupported when it has no checkpoint."""
    tier, kv = params.decision.baseline.tier, params.decision.baseline.kv
    record = serving_record.read(paths.quantize_record(model, tier))
    if not record.ok:
        raise Unsupported(f"the baseline {model}/{tier} has no checkpoint: {record.reason}")
    return Variant.of(params, model, tier, kv, paths.tier_dir(model, tier), record, out_dir)


@dataclass(frozen=True)
class TokenDists:
    """One text's next-token distributions, teacher-forced: row t is the distribution after its first
    t + 1 tokens. `ids`/`logprobs` are [positions, k], ids < 0 padding; `top1` the argmax at each row."""
    ids: Any
    logprobs: Any
    top1: Any


class Unsupported(Exception):
    """This backend cannot run the variant on this hardware; the message is the reason."""


class Session(Protocol):
    """A variant being served: everything evaluate and fidelity_base call on it."""
    lm: Any                    # an lm_eval.api.model.LM
    info: dict[str, Any]       # backend, dtype, kv handling, ... recorded in the results
    full_logits: bool          # exact_fidelity works (the full vocabulary), else token_dists' top-k only
    engine_version: str | None  # the serving engine's version, read from the environment that serves
    chat: bool                 # prompts wrapped in the model's chat template (Variant.chat)
    loglik_refusal: str | None  # why log-likelihood tasks cannot be scored here (None: they can)

    def remaining_s(self) -> float | None:
        """Seconds left of the session's time budget; None: this backend has no budget."""
        ...

    def throughput(self, prompts: list[str], new_tokens: int, repeats: int) -> dict[str, Any]:
        """Generate exactly new_tokens for each prompt as one batch; tokens/s and timings."""
        ...

    def token_dists(self, seqs: list[list[int]], k: int) -> list[TokenDists]:
        """Teacher-forced next-token distributions: the top-k ids and log-probs at each position."""
        ...

    def exact_fidelity(self, baseline: Variant, seqs: list[list[int]]) -> list[tuple[Any, Any]]:
        """Per text, (KL(baseline || this variant), top-1 agreement) at each position over the full
        vocabulary; only when full_logits, else Unsupported."""
        ...

    def second_arithmetic(self, variant: Variant) -> AbstractContextManager[Session]:
        """The same variant computed in the engine's second arithmetic (the one stage noise runs the
        baseline in), for the check of each settled verdict (scoring/verdict/arith_check.py); Unsupported where
        there is none."""
        ...


class Backend(Protocol):
    name: str

    def session(self, variant: Variant) -> AbstractContextManager[Session]:
        """Load or start the variant; raise Unsupported if this hardware cannot run it."""
        ...
