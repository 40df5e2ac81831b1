"""The calibration set: its own small text file, taken in file order (never shuffled)."""
from __future__ import annotations

from pathlib import Path

from pipeline.io import DataError, read_jsonl
from pipeline.schema import Calibration


def texts(cal: Calibration, root: Path | None = None) -> list[str]:
    rows = read_jsonl(cal.path, (cal.text_field,), root)
    if len(rows) < cal.num_samples:
        raise DataError(
            f"calibration.num_samples: {cal.num_samples} requested but {cal.path} has {len(rows)} rows"
        )
    return [r[cal.text_field] for r in rows[: cal.num_samples]]
