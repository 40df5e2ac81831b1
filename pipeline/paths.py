"""Where each stage reads and writes. One place, so stages and dvc.yaml agree."""
from pathlib import Path

# vLLM's kernel support per GPU generation (cites vLLM's docs); shipped with the code, so by file location
HARDWARE_TABLE = Path(__file__).resolve().parent / "data" / "vllm_hardware.yaml"

ARTIFACTS = Path("artifacts")
RESULTS = Path("results")
DVC_LOCK = Path("dvc.lock")     # decide names the run by its digest (report/page_one.py)
SAMPLE_CACHE = Path(".qtier-cache") / "samples"   # per-sample rows kept across runs (evaluation/sample_cache.py)
LOGS = Path("logs")          # one log per stage run (pipeline/stages/runner.py); in .gitignore, no DVC output
CHECKED = ARTIFACTS / "params.checked"   # the check stage's marker; every stage depends on it
RECIPES = ARTIFACTS / "recipes"          # the check stage's copy of each tier's recipe (tier_recipe)
LOAD_SPEC = "qtier_load.json"   # in a tier folder: "load <source> with this load-time quantization"
SOURCE_SPEC = "qtier_source.json"   # in a source folder: the models.<name>.source it was prepared from
PUBLISHED_REF = "qtier_published.json"   # in a tier folder: the published checkpoint it serves
ENDPOINT_REF = "qtier_endpoint.json"     # in a tier folder: the server an endpoint tier names
GGUF_REF = "qtier_gguf.json"             # in a tier folder: the GGUF file a gguf tier serves, and its bill
LLAMA_CPP = Path(".venv-llama")          # llama-cpp-python's server and the converter (install.sh --llama-cpp)
LLAMA_PYTHON = LLAMA_CPP / "bin" / "python"
LLAMA_TREE = LLAMA_CPP / "llama.cpp"     # convert_hf_to_gguf.py, conversion/, gguf-py from the sdist
CONVERTER_SITE = LLAMA_CPP / "converter-site"    # the converter's sentencepiece (on its PYTHONPATH)
FAILED_MARKER = "FAILED.txt"        # in a tier folder whose quantize failed: the reason

# in an eval dir (eval_dir): evaluate's record, per-task sample rows, a vLLM server's log
RESULT_FILE = "result.json"
SAMPLES = "samples"
VLLM_SERVER_LOG = "vllm_server.log"
LLAMA_SERVER_LOG = "llama_server.log"
EVALS = "evals"                      # under results/ (of this run, or of another one: backend_diff)

DECISION_MD = RESULTS / "decision.md"
DECISION_JSON = RESULTS / "decision.json"
DVC_METRICS = RESULTS / "metrics.json"


def tier_recipe(tier: str) -> Path:
    """The check stage's copy of a tier's recipe file, or a constant marker for a tier without one:
    quantize@<model>-<tier> and kvscales depend on their own tier's copy, so editing one recipe re-runs
    that tier alone (dvc.yaml cannot name the file params.yaml gives per tier)."""
    return RECIPES / f"{tier}.yaml"


def source_dir(model: str) -> Path:
    return ARTIFACTS / model / "source"


def probes_dir(model: str) -> Path:
    """The probe sets written for the model with its own tokenizer (stage probes)."""
    return ARTIFACTS / model / "probes"


def probe_data(model: str, task: str) -> Path:
    return probes_dir(model) / f"{task}.jsonl"


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


def kvrepair_records(model: str, tier: str) -> Path:
    """Stage kvrepair@<model>-<tier>: one record per KV mode, the layers a repaired mode keeps (a constant
    marker for any other mode, so evaluate depends on its own mode's file only)."""
    return RESULTS / "kvrepair" / f"{model}-{tier}"


def serving_checkpoint(model: str, tier: str, kv: str, calibrated: bool) -> Path:
    """The checkpoint folder a variant is served from: the tier's own, or for a KV mode with calibrated
    scales, the tier re-made with them (stage kvscales)."""
    return kvscales_dir(model, tier) / kv if calibrated else tier_dir(model, tier)


def serving_record(model: str, tier: str, kv: str, calibrated: bool) -> Path:
    """The record of `serving_checkpoint` (quantize's, or kvscales')."""
    return kvscales_records(model, tier) / f"{kv}.json" if calibrated else quantize_record(model, tier)


def stage_log(stage: str) -> Path:
    """All library output of one stage run, by its dvc.yaml name (`evaluate@<model>-<tier>-<kv>`);
    a re-run overwrites it and nothing reads it."""
    return LOGS / f"{stage}.log"


def timing(stage: str) -> Path:
    """Wall time of one stage run. No stage depends on these: a re-run that reproduces the same
    outputs must not invalidate the stages after it."""
    return RESULTS / "timings" / f"{stage}.json"


def eval_dir(model: str, tier: str, kv: str) -> Path:
    return RESULTS / EVALS / model / f"{tier}-{kv}"


def baseline_dir(model: str) -> Path:
    """Stage baseline@<model>: the baseline evaluated to every cap, before any variant."""
    return RESULTS / "baseline" / model


def noise_dir(model: str) -> Path:
    """Stage noise@<model>: the baseline in the engine's second arithmetic (result.json, samples/)."""
    return RESULTS / "noise" / model


def eval_result(model: str, tier: str, kv: str) -> Path:
    return eval_dir(model, tier, kv) / RESULT_FILE


def regressions_page(model: str, variant: str) -> str:
    """A variant's regressions page, relative to results/ (decision.md links it from there)."""
    return f"regressions/{model}-{variant}.md"


def plot_file(model: str) -> str:
    """A model's quality-vs-memory plot, relative to results/."""
    return f"plots/{model}-quality_vs_memory.png"


ACROSS_PLOT = "plots/across-models-quality_vs_memory.png"   # decision.baseline.model set: relative to results/


def position_plot(model: str) -> str:
    """A model's KL-by-position plot (eval.long_context), relative to results/."""
    return f"plots/{model}-kl_by_position.png"


def retrieval_plot(model: str) -> str:
    """A model's retrieval-accuracy-by-length plot (the retrieval suite's tasks), relative to results/."""
    return f"plots/{model}-retrieval_by_length.png"


def server_log(model: str, variant: str) -> str:
    """A variant's vLLM server log, relative to results/ (where decision.md names it)."""
    return f"{EVALS}/{model}/{variant}/{VLLM_SERVER_LOG}"


FIDELITY_ROWS = "fidelity.jsonl"   # in an eval dir: per fidelity text, KL and top-1 agreement per position


def fidelity_base(model: str) -> Path:
    """The baseline's top-k next-token distributions on the fidelity texts (stage fidelity_base)."""
    return RESULTS / "fidelity" / f"{model}.npz"


def long_base(model: str) -> Path:
    """The baseline's top-k next-token distributions at every position of the long texts (stage
    fidelity_base, eval.long_context)."""
    return RESULTS / "fidelity" / f"{model}-long.npz"


def fidelity_logs(model: str) -> Path:
    """Where fidelity_base keeps a served baseline's logs (vLLM); nothing reads them."""
    return ARTIFACTS / model / "fidelity_base"


EVAL_DATA_MANIFEST = ARTIFACTS / "eval_data" / "manifest.json"   # task -> public spec it holds


def eval_data(task: str) -> Path:
    """Local copy of a public eval set named in params (written by the evalsets stage)."""
    return ARTIFACTS / "eval_data" / f"{task}.jsonl"
