"""Where each stage reads and writes. One place, so stages and dvc.yaml agree."""
from pathlib import Path

ARTIFACTS = Path("artifacts")
RESULTS = Path("results")
CHECKED = ARTIFACTS / "params.checked"   # the check stage's marker; every stage depends on it
RECIPES = ARTIFACTS / "recipes"          # the check stage's copy of each tier's recipe (tier_recipe)
LOAD_SPEC = "qtier_load.json"   # in a tier folder: "load <source> with this load-time quantization"


def tier_recipe(tier: str) -> Path:
    """The check stage's copy of a tier's recipe file, or a constant marker for a tier without one:
    quantize@<model>-<tier> and kvscales depend on their own tier's copy, so editing one recipe re-runs
    that tier alone (dvc.yaml cannot name the file params.yaml gives per tier)."""
    return RECIPES / f"{tier}.yaml"


def source_dir(model: str) -> Path:
    return ARTIFACTS / model / "source"


def tier_dir(model: str, tier: str) -> Path:
    return ARTIFACTS / model / "tiers" / tier


def quantize_record(model: str, tier: str) -> Path:
    """What quantize did, as later stages need it (status, serve path, weight bytes, ...)."""
    return RESULTS / "quantize" / f"{model}-{tier}.json"


def kvscales_dir(model: str, tier: str) -> Path:
    """Stage kvscales@<model>-<tier>: one entry per KV mode, a checkpoint with calibrated k/v scales
    for a calibrated mode, a marker file for any other (evaluate depends on its own entry only)."""
    return ARTIFACTS / model / "kvscales" / tier


def kvscales_records(model: str, tier: str) -> Path:
    return RESULTS / "kvscales" / f"{model}-{tier}"


def serving_checkpoint(model: str, tier: str, kv: str, calibrated: bool) -> Path:
    """The checkpoint folder a variant is served from: the tier's own, or for a KV mode with calibrated
    scales, the tier re-made with them (stage kvscales)."""
    return kvscales_dir(model, tier) / kv if calibrated else tier_dir(model, tier)


def serving_record(model: str, tier: str, kv: str, calibrated: bool) -> Path:
    """The record of `serving_checkpoint` (quantize's, or kvscales')."""
    return kvscales_records(model, tier) / f"{kv}.json" if calibrated else quantize_record(model, tier)


def timing(stage: str) -> Path:
    """Wall time of one stage run. No stage depends on these: a re-run that reproduces the same
    outputs must not invalidate the stages after it."""
    return RESULTS / "timings" / f"{stage}.json"


def eval_dir(model: str, tier: str, kv: str) -> Path:
    return RESULTS / "evals" / model / f"{tier}-{kv}"


FIDELITY_ROWS = "fidelity.jsonl"   # in an eval dir: per fidelity text, KL and top-1 agreement per position


def fidelity_base(model: str) -> Path:
    """The baseline's top-k next-token distributions on the fidelity texts (stage fidelity_base)."""
    return RESULTS / "fidelity" / f"{model}.npz"


def fidelity_logs(model: str) -> Path:
    """Where fidelity_base keeps a served baseline's logs (vLLM); nothing reads them."""
    return ARTIFACTS / model / "fidelity_base"


EVAL_DATA_MANIFEST = ARTIFACTS / "eval_data" / "manifest.json"   # task -> public spec it holds


def eval_data(task: str) -> Path:
    """Local copy of a public eval set named in params (written by the evalsets stage)."""
    return ARTIFACTS / "eval_data" / f"{task}.jsonl"
