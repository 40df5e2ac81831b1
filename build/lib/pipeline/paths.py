"""Where each stage reads and writes. One place, so stages and dvc.yaml agree."""
from pathlib import Path

ARTIFACTS = Path("artifacts")
RESULTS = Path("results")
LOAD_SPEC = "qtier_load.json"   # in a tier folder: "load <source> with this load-time quantization"


def source_dir(model: str) -> Path:
    return ARTIFACTS / model / "source"


def tier_dir(model: str, tier: str) -> Path:
    return ARTIFACTS / model / "tiers" / tier


def eval_dir(model: str, tier: str, kv: str) -> Path:
    return RESULTS / "evals" / model / f"{tier}-{kv}"


EVAL_DATA_MANIFEST = ARTIFACTS / "eval_data" / "manifest.json"   # task -> public spec it holds


def eval_data(task: str) -> Path:
    """Local copy of a public eval set named in params (written by the evalsets stage)."""
    return ARTIFACTS / "eval_data" / f"{task}.jsonl"
