"""Check's KV-mode checks: each `kv_modes.<name>.cache_dtype` against the installed vLLM's own list (read
as text: pipeline/domain/hardware/vllm_installed.py) and qtier's format table, each `skip_layers` index against
the model's layer count. One line naming the key, the value and the vLLM version; no model is loaded."""
from __future__ import annotations

import difflib
import json
import struct
from pathlib import Path

from pipeline import paths
from pipeline.domain.model import sources
from pipeline.domain.sets import calibration, long_texts
from pipeline.domain.hardware.kv_formats import FORMATS
from pipeline.domain.hardware.vllm_installed import RECORDED_VERSION, installed
from pipeline.io import DataError
from pipeline.schema import ConfigError, Params


def known_dtypes(p: Params, root: Path) -> tuple[tuple[str, ...], str]:
    """(the dtypes vLLM accepts, which vLLM says so): the installed one's, else qtier's table as read
    from vLLM RECORDED_VERSION."""
    found = installed(p.serving.vllm.python, root)
    if found is not None and found.cache_dtypes:
        return found.cache_dtypes, f"vLLM {found.version}"
    return tuple(FORMATS), f"vLLM {RECORDED_VERSION} (qtier's table: no vLLM at {p.serving.vllm.python})"


def num_layers(p: Params, model: str, root: Path) -> int | None:
    """The model's num_hidden_layers: the prepared source's config.json, else the source itself (a local
    folder, the embedded GGUF's header); None for a hub model not prepared yet."""
    prepared = root / paths.source_dir(model) / "config.json"
    if prepared.is_file():
        return json.loads(prepared.read_text()).get("num_hidden_layers")
    kind, _, ref = p.models[model].source.partition(":")
    if kind == "embedded":
        try:
            return gguf_block_count(sources.embedded_gguf_path(ref))
        except FileNotFoundError:
            return None     # the prepare stage says how to install it
    geometry = sources.geometry(p.models[model].source, root)
    return (geometry or {}).get("num_hidden_layers")


def check(p: Params, root: Path) -> None:
    modes = {name: m for name, m in p.kv_modes.items() if m.cache_dtype != "auto" or m.skip_layers}
    if not modes:
        return
    dtypes, which = known_dtypes(p, root)
    for name, mode in modes.items():
        key, value = f"kv_modes.{name}.cache_dtype", mode.cache_dtype
        if value not in dtypes:
            close = difflib.get_close_matches(value, dtypes, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{key}: {value!r} is not one of {which}'s KV cache dtypes{hint}: {', '.join(dtypes)}")
        if value not in FORMATS:
            raise ConfigError(f"{key}: {value!r} ({which}) is not in qtier's format table "
                              "(pipeline/domain/hardware/kv_formats.py): its bytes and its simulation are unknown")
        if mode.repair is not None:
            repair_check(p, name, root)
        if not mode.skip_layers:
            continue
        for model in p.models:
            layers = num_layers(p, model, root)
            if layers is None:
                continue        # a hub model: prepare reads its config, the engines refuse the index there
            beyond = [i for i in mode.skip_layers if i >= layers]
            if beyond:
                raise ConfigError(f"kv_modes.{name}.skip_layers: layer {beyond[0]} is beyond model {model}'s "
                                  f"{layers} layers (0..{layers - 1}; {which})")


def repair_check(p: Params, name: str, root: Path) -> None:
    """A repaired mode (kv_modes.<name>.repair): a format the reference engine simulates (the repair
    measures its rounding there), not the baseline's own mode, and the texts it ranks layers on."""
    mode, key = p.kv_modes[name], f"kv_modes.{name}.repair"
    if not FORMATS[mode.cache_dtype].simulated:
        raise ConfigError(f"{key}: {mode.cache_dtype!r} is not simulated by the reference engine "
                          f"({FORMATS[mode.cache_dtype].refusal}): its layers cannot be ranked")
    if name == p.decision.baseline.kv:
        raise ConfigError(f"{key}: {name!r} is decision.baseline.kv, the mode every variant is judged against")
    r = mode.repair
    if r.data == "long_context":
        if p.eval.long_context is None:
            raise ConfigError(f"{key}.data: long_context needs eval.long_context (its texts), which is not set")
        rows = len(long_texts.texts(p.eval.long_context.data, p.eval.long_context.field, 0, root))
        if r.texts > rows:
            raise ConfigError(f"{key}.texts: {r.texts} texts but {p.eval.long_context.data} has {rows} rows")
    else:
        try:
            calibration.selection_texts(p.calibration, r.texts, root)
        except DataError as e:
            raise ConfigError(f"kv_modes.{name}.{e}") from None


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def gguf_block_count(path: Path) -> int | None:
    """`<arch>.block_count` from a GGUF file's metadata, read up to that key only (GGUFReader maps every
    tensor first: seconds, where check has under 5 for a refusal). GGUF v2/v3 little-endian layout."""
    with open(path, "rb") as f:
        def read(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def string():
            return f.read(read("Q")).decode("utf-8", "replace")

        def value(kind):
            if kind == 8:
                return string()
            if kind == 9:
                item, count = read("I"), read("Q")
                return [value(item) for _ in range(count)]
            return read(_SCALARS[kind])
        if f.read(4) != b"GGUF" or read("I") < 2:
            return None
        read("Q")
        arch = None
        for _ in range(read("Q")):
            key, found = string(), value(read("I"))
            if key == "general.architecture":
                arch = found
            elif arch and key == f"{arch}.block_count":
                return int(found)
    return None
