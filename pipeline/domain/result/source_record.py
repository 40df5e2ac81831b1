"""The record prepare writes in a model's source folder (qtier_source.json, paths.SOURCE_SPEC): the
source it came from and each setting it resolved against the tokenizer (chat.RECORD_KEY,
bos.RECORD_KEY). Later stages read those values here, never the param again.

    from pipeline.domain.result import source_record
    source_record.resolved("smollm2-135m", "apply_chat_template")    # -> True
"""
from __future__ import annotations

from pathlib import Path

from pipeline import io, paths


def resolved(model: str, key: str, source: Path | None = None) -> bool:
    """The value prepare resolved for `model`'s `key`, from its source folder (default
    paths.source_dir(model)); a record without it (an older prepare) is a DataError saying to re-run it."""
    record_file = (source or paths.source_dir(model)) / paths.SOURCE_SPEC
    if not record_file.is_file():
        raise io.DataError(f"{record_file}: not found (stage prepare@{model} writes it)")
    value = io.read_json(record_file).get(key)
    if not isinstance(value, bool):
        raise io.DataError(f"{record_file}: no {key} (prepared by an older qtier): re-run prepare@{model}")
    return value


def read(model: str, source: Path | None = None) -> dict:
    """The whole record prepare wrote for `model` ({} when there is none: check reads a local folder
    before prepare ran)."""
    record_file = (source or paths.source_dir(model)) / paths.SOURCE_SPEC
    return io.read_json(record_file) if record_file.is_file() else {}
