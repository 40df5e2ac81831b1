"""The calibration set: its own small text file, taken in file order (never shuffled). Its first
`num_samples` rows calibrate a quantizer; a repaired tier selects what to promote on its last rows,
which must not be those (pipeline/quant/repair.py)."""
from __future__ import annotations

from pathlib import Path

from pipeline.io import DataError, read_jsonl
from pipeline.schema import Calibration, Params


def texts(cal: Calibration, root: Path | None = None) -> list[str]:
    rows = read_jsonl(cal.path, (cal.text_field,), root)
    if len(rows) < cal.num_samples:
        raise DataError(
            f"calibration.num_samples: {cal.num_samples} requested but {cal.path} has {len(rows)} rows"
        )
    return [r[cal.text_field] for r in rows[: cal.num_samples]]


def selection_texts(cal: Calibration, count: int, root: Path | None = None) -> list[str]:
    """The calibration file's last `count` rows: a repair's selection texts, apart from the rows a
    quantizer calibrates on."""
    rows = read_jsonl(cal.path, (cal.text_field,), root)
    if cal.num_samples + count > len(rows):
        raise DataError(f"repair.texts: {count} selection texts after calibration.num_samples "
                        f"({cal.num_samples}) need {cal.num_samples + count} rows; {cal.path} has {len(rows)}")
    return [r[cal.text_field] for r in rows[len(rows) - count:]]


def check(p: Params, root: Path | None = None) -> None:
    """The calibration rows every tier needs are there (check stage): io.DataError naming the key."""
    texts(p.calibration, root)
    for name, tier in p.tiers.items():
        if tier.repair is not None:
            try:
                selection_texts(p.calibration, tier.repair.texts, root)
            except DataError as e:
                raise DataError(f"tiers.{name}.{e}") from None
