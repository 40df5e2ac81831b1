"""The calibration set: its own small text file, taken in file order (never shuffled)."""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.config import Calibration, ConfigError


class DataError(ConfigError):
    """A data file problem; the message names the file and line."""


def read_jsonl(path: str | Path, required: tuple[str, ...] = (), root: Path | None = None) -> list[dict]:
    """Read a JSONL file; errors name the file and line."""
    path = Path(path)
    full = path if root is None or path.is_absolute() else root / path
    if not full.is_file():
        raise DataError(f"{path}: file not found")
    rows = []
    with full.open(encoding="utf-8") as f:
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


def texts(cal: Calibration, root: Path | None = None) -> list[str]:
    rows = read_jsonl(cal.path, (cal.text_field,), root)
    if len(rows) < cal.num_samples:
        raise DataError(
            f"calibration.num_samples: {cal.num_samples} requested but {cal.path} has {len(rows)} rows"
        )
    return [r[cal.text_field] for r in rows[: cal.num_samples]]
