"""File I/O: atomic writes (a crash never leaves a truncated result a later stage reads as valid),
and JSON/JSONL readers whose errors name the file and line."""
from __future__ import annotations

from io import StringIO
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pipeline.schema import ConfigError


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def atomic_write_jsonl(path: str | Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class DataError(ConfigError):
    """A data file problem; the message names the file and line."""


def read_text(path: str | Path, shown: str | Path | None = None) -> str:
    """A UTF-8 file's text. A byte sequence that is not UTF-8 is a DataError naming the file (as
    `shown`, default path), the line and the column, not a bare UnicodeDecodeError."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise DataError(f"{shown or path}:{line}: not UTF-8 (byte 0x{data[e.start]:02x} at column {column}); "
                        "save the file as UTF-8") from None


def read_jsonl(path: str | Path, required: tuple[str, ...] = (), root: Path | None = None) -> list[dict]:
    """Read a JSONL file; errors name the file and line."""
    path = Path(path)
    full = path if root is None or path.is_absolute() else root / path
    if not full.is_file():
        raise DataError(f"{path}: file not found")
    rows = []
    # decoded whole, so a bad byte is reported by line; split as text mode splits (universal newlines)
    with StringIO(read_text(full, shown=path), newline=None) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{n}: expected a JSON object")
            for field in required:
                if field not in row or row[field] in (None, ""):
                    raise DataError(f"{path}:{n}: missing field {field!r}")
            rows.append(row)
    if not rows:
        raise DataError(f"{path}: file is empty")
    return rows


class AtomicDir:
    """Build a directory under a temporary name and move it into place only on success.

    with AtomicDir("artifacts/m/int4") as tmp: model.save_pretrained(tmp)
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.partial")

    def __enter__(self) -> Path:
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        if self.path.exists():
            shutil.rmtree(self.path)
        os.replace(self.tmp, self.path)
