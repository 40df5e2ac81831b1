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
# per check, PASS or FAIL; exits 1 if any failed.
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
p["serving"].setdefault("vllm", {}).update(enforce_eager=False, max_model_len=4096)
p["serving"]["slo"] = {"ttft_ms": 500, "tpot_ms": 50, "percentile": 99, "max_concurrency": 64,
                       "max_probes": 4, "time_budget_s": 120}
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
EOF
python -m pipeline.config > /dev/null

start=$(date +%s)
dvc repro || echo "gpu_check: dvc repro exited $? (failed rows are checked below)"
seconds=$(( $(date +%s) - start ))

python - "$seconds" <<'EOF'
import json
import sys
from pathlib import Path

seconds = int(sys.argv[1])
d = json.load(open("results/decision.json"))
rows = [r for r in d["rows"] if r["model"] == "gpu-check"]
served = [r for r in rows if r["status"] == "ok"]
quant = {p.stem: json.loads(p.read_text()) for p in Path("results/quantize").glob("gpu-check-*.json")}
checks = [
    ("every variant has a row", len(rows) > 0 and all(r["status"] in ("ok", "unsupported") for r in rows)),
    ("the baseline and the 8/4-bit compressed-tensors tiers were served",
     {("fp16", "auto"), ("int8", "auto"), ("int4-gptq", "auto")} <= {(r["tier"], r["kv"]) for r in served}),
    ("every served row ran on vLLM at one compute dtype (bfloat16)",
     all(r["backend"] == "vllm" and r["compute_dtype"] == "bfloat16" for r in served)),
    ("quantize computed on the GPU in the model's dtype",
     all((q.get("compute") or {}).get("device") == "cuda" for q in quant.values() if q.get("recipe"))),
    ("lm-eval kept gpu_num_concurrent requests in flight",
     all((r["serving"] or {}).get("num_concurrent", 0) >= 16 for r in served)),
    ("the load test ran at the GPU's concurrency levels",
     all(len((r["load"] or {}).get("bench", {})) >= 3 for r in served)),
    ("an SLO search reported a max concurrency per served row",
     all(((r["load"] or {}).get("slo") or {}).get("max_concurrency_meeting_slo") is not None for r in served)),
    ("fidelity (KL, top-1 agreement) for every served row",
     all((r.get("fidelity") or {}).get("status") == "ok" for r in served)),
    ("a vllm serve line for every target GPU with a recommendation",
     all(g["command"] for g in d["per_gpu"]["gpu-check"].values() if g)),
    (f"finished in {seconds // 60} min {seconds % 60} s (expected about 10)", seconds < 30 * 60),
]
for name, ok in checks:
    print(("PASS " if ok else "FAIL ") + name)
print(f"results: {Path.cwd()}/results/decision.md")
sys.exit(0 if all(ok for _, ok in checks) else 1)
EOF
