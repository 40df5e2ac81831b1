"""Facts read from a vLLM server log: KV capacity, quantization, and why it failed. Pure.

Formats (vLLM 0.32, also the GPU builds since 0.8):
  "... [kv_cache_utils.py:2327] CPU KV cache size: 31,616 tokens, Maximum concurrency for 2,048
   tokens per request: 15.44x"   (older releases print the two halves on separate lines, "GPU ...")
  "... Initializing a V1 LLM engine (v0.32.0) with config: model=..., dtype=torch.float32, ...,
   quantization=compressed-tensors, ..., kv_cache_dtype=auto, ..."
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_KV = re.compile(r"(?:GPU |CPU )?KV cache size: ([\d,]+) tokens")
_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_CFG = re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\) with config: (.*)")
_FIELD = re.compile(r"(\w+)=([^,]+)")
_KV_MEM = re.compile(r"Auto set \(([\d.]+)/[\d.]+\) GiB for KV cache|Available KV cache memory: ([\d.]+) GiB")
_KERNEL = re.compile(r"Using (\S+) (?:kernel|linear kernel|backend)", re.IGNORECASE)
_ERROR_LINE = re.compile(r"^(?:\w+(?:\.\w+)*(?:Error|Exception)|AssertionError|NotImplementedError)\b.*")
_CHOICES = re.compile(r"Must be one of \[[^\]]*\]")
_PREFIX = re.compile(r"^\((?:[A-Za-z_]+(?:-\d+)?) pid=\d+\)\s+(?:\w+ \d\d-\d\d [\d:]+ \[[^\]]+\]\s+)?")


@dataclass(frozen=True)
class Capacity:
    kv_tokens: int
    max_model_len: int | None
    max_concurrency: float | None


def strip_prefix(line: str) -> str:
    """Drop vLLM's '(EngineCore pid=1) ERROR 11-29 19:01:09 [file.py:953] ' prefix."""
    return _PREFIX.sub("", line.rstrip("\n"))


def capacity(log: str) -> Capacity | None:
    kv = _KV.search(log)
    if not kv:
        return None
    conc = _CONC.search(log)
    return Capacity(int(kv.group(1).replace(",", "")),
                    int(conc.group(1).replace(",", "")) if conc else None,
                    float(conc.group(2)) if conc else None)


def kv_memory_gib(log: str) -> float | None:
    """Memory vLLM gave the KV cache (CPU: 'Auto set (x/y) GiB for KV cache'; GPU: 'Available KV
    cache memory: x GiB'), as printed (2 decimals)."""
    m = _KV_MEM.search(log)
    return float(m.group(1) or m.group(2)) if m else None


def engine_config(log: str) -> dict[str, str]:
    m = _CFG.search(log)
    if not m:
        return {}
    fields = {k: v.strip() for k, v in _FIELD.findall(m.group(2))}
    fields["vllm_version"] = m.group(1)
    return fields


def kernels(log: str) -> list[str]:
    found: list[str] = []
    for line in log.splitlines():
        k = _KERNEL.search(strip_prefix(line))
        if k and k.group(0) not in found:
            found.append(k.group(0))
    return found


def failure_reason(log: str) -> str | None:
    """The root cause vLLM printed: the first exception line of the worker or engine (not the
    generic 'Engine core initialization failed' wrapper), without vLLM's log prefix."""
    generic = ("Engine core initialization failed", "WorkerProc initialization failed",
               "WorkerProc failed to start", "EngineCore failed to start")
    lines = [strip_prefix(raw).strip() for raw in log.splitlines()]
    bare = None
    for i, line in enumerate(lines):
        if _ERROR_LINE.match(line) and not any(g in line for g in generic):
            if "ValidationError" in line:   # pydantic puts the message on the following lines
                detail = next((x for x in lines[i + 1:i + 4] if x.startswith("Value error")), "")
                # the list of every method vLLM knows is in the server log; the row needs the refusal
                detail = _CHOICES.sub("(the accepted values are listed in the server log)", detail)
                line = f"{line}: {detail}" if detail else line
            if line.endswith("Reasons:"):   # a kernel search: one line per kernel tried and why it refused
                tried = [x for x in lines[i + 1:i + 8] if " cannot implement due to: " in x or " not supported" in x]
                line = f"{line} {'; '.join(tried)}" if tried else line
            if ":" not in line:             # a bare `raise TimeoutError`: the chained one says what timed out
                bare = bare or line
                continue
            return line[:400]
    return bare


def engine_dead(log: str) -> bool:
    """The engine crashed while the API server kept answering (HTTP 500)."""
    return "EngineDeadError" in log or "EngineCore encountered a fatal error" in log


# vLLM's warning when a quantized KV cache runs with k/v scales of 1.0 (none loaded from the checkpoint)
_UNIT_SCALES = "Using KV cache scaling factor 1.0 for fp8"


def unit_kv_scales(log: str) -> bool:
    """Whether the engine said it runs its fp8 KV cache with scale 1.0."""
    return _UNIT_SCALES in log
