"""The fixed texts on which every variant's next-token distributions are compared with the baseline's
(eval.fidelity in params.yaml): rows of a JSONL file in file order, the named fields of a row joined
by a blank line. The same token ids are scored for every variant: the fidelity_base stage stores them."""
from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.io import DataError, atomic_write_bytes, read_jsonl
from pipeline.schema import Fidelity


def texts(cfg: Fidelity, root: Path | None = None) -> list[str]:
    rows = read_jsonl(cfg.data, tuple(cfg.fields), root)
    if len(rows) < cfg.limit:
        raise DataError(f"eval.fidelity.limit: {cfg.limit} texts requested but {cfg.data} has {len(rows)} rows")
    return ["\n\n".join(str(r[f]) for f in cfg.fields) for r in rows[: cfg.limit]]


@dataclass(frozen=True)
class Baseline:
    """The baseline's distributions on the fidelity texts: per text its token ids and, per position
    after the first, its top-k next-token ids / log-probs (ids < 0: padding) and its argmax."""
    seqs: list[list[int]]
    ids: list[np.ndarray]
    logprobs: list[np.ndarray]
    top1: list[np.ndarray]
    meta: dict          # backend, compute_dtype, k, model, tier, kv: who produced them

    def coverage(self) -> float:
        """Mean probability mass the stored top-k holds per position (1.0: the whole distribution)."""
        mass = np.concatenate([np.exp(lp.astype(np.float64)).sum(-1) for lp in self.logprobs])
        return float(mass.mean())


def save(path: Path, base: Baseline) -> None:
    """Writes `base` as .npz, byte for byte the same for the same arrays (no time stamp inside): a
    re-run that reads it from the sample cache changes no DVC hash downstream."""
    def cat(parts: list, dtype, width: int = 0) -> np.ndarray:
        if not parts:
            return np.zeros((0, width) if width else (0,), dtype=dtype)
        return np.concatenate([np.asarray(x) for x in parts]).astype(dtype)

    k = base.ids[0].shape[1] if base.ids else 0
    arrays = {"lengths": np.array([len(s) for s in base.seqs], dtype=np.int64),
              "tokens": cat(base.seqs, np.int64), "ids": cat(base.ids, np.int64, k),
              "logprobs": cat(base.logprobs, np.float32, k), "top1": cat(base.top1, np.int64),
              "meta": np.array(json.dumps(base.meta))}
    atomic_write_bytes(path, _npz(arrays))


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    # np.savez stamps each member with the current time, so the same arrays made different files
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    return buf.getvalue()


def load(path: Path) -> Baseline:
    if not Path(path).is_file():
        raise DataError(f"{path}: file not found (run the fidelity_base stage)")
    with np.load(path) as z:
        lengths, meta = z["lengths"], json.loads(str(z["meta"]))
        if not len(lengths):
            return Baseline([], [], [], [], meta)
        tok_cuts = np.cumsum(lengths)[:-1]
        pos_cuts = np.cumsum(lengths - 1)[:-1]
        return Baseline(seqs=[s.tolist() for s in np.split(z["tokens"], tok_cuts)],
                        ids=np.split(z["ids"], pos_cuts), logprobs=np.split(z["logprobs"], pos_cuts),
                        top1=np.split(z["top1"], pos_cuts), meta=meta)
