"""Whether a model's prompts are wrapped in its chat template: models.<name>.apply_chat_template
(auto | true | false) against the template its tokenizer carries.

Resolved once per model, before any quantization: by check for a `local:` folder (there at check
time), by prepare for every source on the folder it writes, which records the answer in that folder's
qtier_source.json (paths.SOURCE_SPEC). evaluate and fidelity_base read that record (`recorded`, through
engines.base.Variant.of), never the param again: what they apply is what prepare checked.

    from pipeline.domain.model import chat
    chat.resolve_folder("base", "auto", Path("models/base"), "models/base")    # -> False: no template
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Mapping

from pipeline import io
from pipeline.domain.result import source_record
from pipeline.schema import ConfigError

TOKENIZER_CONFIG = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"            # transformers >= 4.50 saves a tokenizer's template here
TEMPLATE_DIR = "additional_chat_templates"       # named templates, <name>.jinja each
PROCESSOR_TEMPLATE = "chat_template.json"        # a processor's template: AutoTokenizer does not read it
RECORD_KEY = "apply_chat_template"               # in qtier_source.json

Param = Literal["auto"] | bool


def has_template(tokenizer_config: Mapping | None, jinja: str | None = None,
                 named: Mapping[str, str] | None = None) -> bool:
    """Whether the tokenizer AutoTokenizer loads from these files has a default chat template, as
    transformers decides it: template files (chat_template.jinja, additional_chat_templates/<name>.jinja)
    replace the config's `chat_template` entry; several templates need one named `default`. Pure.

    tokenizer_config: tokenizer_config.json's contents (None: no such file); jinja: chat_template.jinja's
    text (None: no file); named: additional_chat_templates' texts by template name."""
    files = {**(named or {}), **({"default": jinja} if jinja is not None else {})}
    if files:
        return bool((files.get("default") or "").strip())
    entry = (tokenizer_config or {}).get("chat_template")
    if isinstance(entry, str):
        return bool(entry.strip())
    if isinstance(entry, list):         # the legacy form of several templates: [{name, template}, ...]
        return any(isinstance(t, dict) and t.get("name") == "default" and str(t.get("template") or "").strip()
                   for t in entry)
    return False


def resolve(name: str, param: Param, has: bool, where: str) -> bool:
    """models.<name>.apply_chat_template made concrete: auto is whether the tokenizer has a template
    (`has`); true without one is a ConfigError naming the key and `where` (the folder or source). Pure."""
    if param == "auto":
        return has
    if param is True and not has:
        raise ConfigError(f"models.{name}.apply_chat_template: true, but {where}'s tokenizer has no chat template")
    return bool(param)


def folder_has_template(folder: Path) -> bool:
    """has_template on a Hugging Face folder's own files (no tokenizer is loaded)."""
    config = folder / TOKENIZER_CONFIG
    try:
        tokenizer_config = json.loads(io.read_text(config)) if config.is_file() else None
    except json.JSONDecodeError as e:
        raise io.DataError(f"{config}: not valid JSON ({e.msg})") from None
    jinja = folder / TEMPLATE_FILE
    named = {f.name.removesuffix(".jinja"): io.read_text(f) for f in sorted((folder / TEMPLATE_DIR).glob("*.jinja"))}
    return has_template(tokenizer_config, io.read_text(jinja) if jinja.is_file() else None, named)


def resolve_folder(name: str, param: Param, folder: Path, where: str) -> bool:
    """resolve() on a folder's tokenizer files; a `true` refused there says so of a chat_template.json
    beside them (a processor's file, which the tokenizer lm-eval uses never reads)."""
    try:
        return resolve(name, param, folder_has_template(folder), where)
    except ConfigError as e:
        if (folder / PROCESSOR_TEMPLATE).is_file():
            raise ConfigError(f"{e} (its {PROCESSOR_TEMPLATE} is a processor's, which AutoTokenizer does not "
                              f"read)") from None
        raise


def recorded(model: str, source: Path | None = None) -> bool:
    """The value prepare resolved for `model` and recorded in its source folder (source_record.resolved)."""
    return source_record.resolved(model, RECORD_KEY, source)
