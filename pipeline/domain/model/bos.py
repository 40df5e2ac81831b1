"""Whether a model's prompts start with its BOS token: models.<name>.add_bos_token (auto | true | false)
against what its tokenizer does and has.

Resolved once per model, as the chat template is (pipeline/domain/model/chat.py): check refuses an
impossible `true` on a `local:` folder before any quantization; prepare resolves every source on the
folder it writes and records the answer in qtier_source.json; evaluate and fidelity_base read that
record (`recorded`, through engines.base.Variant.of). Every backend is then told the same thing: the
reference backend's HFLM and the vLLM/endpoint backends' local-completions get `add_bos_token`, the
fidelity texts are tokenized with it, so a prompt is the same tokens on every engine.

auto is what the tokenizer does by itself: a Llama-2/3 or Gemma tokenizer prepends BOS, GPT-2 style
tokenizers (SmolLM2's) do not. Set `true` for a model trained with BOS whose tokenizer does not add it
(a tokenizer converted from GGUF may not); lm-eval's own default for causal models is no BOS.

    from pipeline.domain.model import bos
    bos.resolve("m", "auto", adds=True, has=True, where="models/m")    # -> True
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pipeline import io
from pipeline.domain.result import source_record
from pipeline.schema import ConfigError

RECORD_KEY = "add_bos_token"                     # in qtier_source.json
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json")

Param = Literal["auto"] | bool


def resolve(name: str, param: Param, adds: bool, has: bool, where: str) -> bool:
    """models.<name>.add_bos_token made concrete: auto is whether the tokenizer prepends BOS by itself
    (`adds`); true on a tokenizer with no BOS token (`has`) is a ConfigError naming the key. Pure."""
    if param == "auto":
        return adds
    if param is True and not has:
        raise ConfigError(f"models.{name}.add_bos_token: true, but {where}'s tokenizer has no BOS token")
    return bool(param)


def _token_text(entry) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, an AddedToken dict, or null."""
    if isinstance(entry, dict):
        entry = entry.get("content")
    return entry if isinstance(entry, str) and entry else None


def folder_bos_token(folder: Path) -> str | None:
    """The BOS token a Hugging Face folder's tokenizer files name (None: none), without loading it."""
    for name in TOKENIZER_FILES:
        f = folder / name
        if not f.is_file():
            continue
        try:
            text = _token_text(json.loads(io.read_text(f)).get("bos_token"))
        except (json.JSONDecodeError, AttributeError) as e:
            raise io.DataError(f"{f}: not a JSON object ({e})") from None
        if text:
            return text
    return None


def check_folder(name: str, param: Param, folder: Path, where: str) -> None:
    """check's part, before any quantization: a `true` on a tokenizer without a BOS token stops here.
    auto is resolved by prepare, which loads the tokenizer."""
    if param is True:
        resolve(name, param, adds=False, has=folder_bos_token(folder) is not None, where=where)


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether this (loaded) tokenizer prepends its BOS token to a plain text by itself."""
    bos = getattr(tokenizer, "bos_token_id", None)
    ids = tokenizer("a").input_ids
    return bos is not None and len(ids) > 0 and ids[0] == bos


def resolve_tokenizer(name: str, param: Param, tokenizer, where: str) -> bool:
    """resolve() on a loaded tokenizer (prepare's)."""
    return resolve(name, param, tokenizer_adds_bos(tokenizer), getattr(tokenizer, "bos_token_id", None) is not None,
                   where)


def recorded(model: str, source: Path | None = None) -> bool:
    """The value prepare resolved for `model` and recorded in its source folder (source_record.resolved)."""
    return source_record.resolved(model, RECORD_KEY, source)


def encode(tokenizer, text: str, add_bos: bool) -> list[int]:
    """A text's token ids as the model's prompts are made on every backend: the tokenizer's own ids
    without the special tokens its post-processor may add, then the BOS id first iff add_bos and the
    text does not already start with it (a chat template may render it). Added by id, not by the
    tokenizer's post-processor, which a GPT-2 style tokenizer lacks: `true` means BOS whatever the
    tokenizer would do."""
    ids = list(tokenizer(text, add_special_tokens=False).input_ids)
    bos = getattr(tokenizer, "bos_token_id", None)
    if add_bos and bos is not None and (not ids or ids[0] != bos):
        ids.insert(0, bos)
    return ids
