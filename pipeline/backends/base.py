"""The backend interface every serving engine implements, and the variant it serves."""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.schema import KvMode, Model, Tier


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
    load_quantization: dict | None = None   # bitsandbytes options applied at load time, else None
    out_dir: Path | None = None             # the evaluate stage's own folder, for server logs and bench files

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
