"""The backend interface every serving engine implements, and the variant it serves."""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.config import KvMode, Model, Tier


@dataclass(frozen=True)
class Variant:
    model: str
    tier: str
    kv: str
    checkpoint: Path
    model_cfg: Model
    tier_cfg: Tier
    kv_cfg: KvMode

    @property
    def key(self) -> str:
        return f"{self.model}-{self.tier}-{self.kv}"


class Unsupported(Exception):
    """This backend cannot run the variant on this hardware; the message is the reason."""


class Session(Protocol):
    lm: Any                    # an lm_eval.api.model.LM
    info: dict[str, Any]       # backend, dtype, kv handling, ... recorded in the results

    def throughput(self, prompts: list[str], new_tokens: int, repeats: int) -> dict[str, float]:
        """Generate exactly new_tokens for each prompt as one batch; tokens/s and timings."""
        ...


class Backend(Protocol):
    name: str

    def session(self, variant: Variant) -> AbstractContextManager[Session]:
        """Load or start the variant; raise Unsupported if this hardware cannot run it."""
        ...
