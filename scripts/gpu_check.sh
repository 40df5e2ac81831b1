#!/usr/bin/env bash
# The whole pipeline on a GPU host with a small hub model, then a check of what a GPU run must show.
#
#     bash scripts/gpu_check.sh [hub model, default Qwen/Qwen2.5-0.5B-Instruct]
#
# NOT RUN BY THIS PROJECT: it has no GPU machine. The GPU branches it exercises are unit-tested with the
# accelerator mocked (tests/test_compute.py, tests/test_vllm_backend.py). Expect about 10 minutes on one
# A100/H100/L4 with internet (the model and the official vLLM wheel are downloaded).
#
# Works in a copy of this repository (your params.yaml and results are untouched) and prints one line
# per check (scripts/gpu_check_results.py), PASS or FAIL; exits 1 if any failed.
set -euo pipefail
model=${1:-Qwen/Qwen2.5-0.5B-Instruct}
repo=$(cd "$(dirname "$0")/.." && pwd)

command -v nvidia-smi >/dev/null || { echo "gpu_check: no nvidia-smi: this is not a GPU host" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

work=$(mktemp -d /tmp/qtier-gpu-check.XXXX)
git clone --quiet "$repo" "$work"
cd "$work"
bash scripts/install.sh --vllm
source .venv/bin/activate

# The default model swapped for a hub model in bfloat16, served by vLLM with CUDA graphs, and the demo
# limits kept small so the run fits in minutes.
python - "$model" <<'EOF'
import sys

import yaml

p = yaml.safe_load(open("params.yaml"))
p["models"] = {"gpu-check": {"source": f"hub:{sys.argv[1]}", "dtype": "bfloat16"}}
p["serving"]["backend"] = "vllm"
# the retrieval suite's prompt lengths are counted with SmolLM2's tokenizer: not this model's
p["eval"]["tasks"] = {k: t for k, t in p["eval"]["tasks"].items() if t.get("config") != "eval_sets/tasks/retrieval.yaml"}
p["serving"].setdefault("vllm", {}).update(enforce_eager=False, max_model_len=4096)
p["serving"]["slo"] = {"ttft_ms": 500, "tpot_ms": 50, "percentile": 99, "max_concurrency": 64,
                       "max_probes": 4, "time_budget_s": 120}
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
EOF
python -m pipeline.config > /dev/null

start=$(date +%s)
dvc repro || echo "gpu_check: dvc repro exited $? (failed rows are checked below)"
seconds=$(( $(date +%s) - start ))

python scripts/gpu_check_results.py "$seconds"
