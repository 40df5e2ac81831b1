"""What the installed vLLM accepts as `--kv-cache-dtype`, read as text from its files, without importing it
(an `import vllm` takes longer than check's whole budget): the `CacheDType` Literal in
vllm/config/cache.py, the CPU attention backend's `supported_kv_cache_dtypes` in
vllm/v1/attention/backends/cpu_attn.py, and the version in vllm/_version.py. Pure reads of files.

    installed(".venv-vllm/bin/python")   # Installed(version='0.32.0', cache_dtypes=(...), cpu_dtypes=(...))
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# What qtier's table was read from, for a machine with no vLLM installed
RECORDED_VERSION = "0.32.0"


@dataclass(frozen=True)
class Installed:
    version: str
    cache_dtypes: tuple[str, ...]       # CacheDType
    cpu_dtypes: tuple[str, ...]         # CPUAttentionBackend.supported_kv_cache_dtypes
    where: str                          # the package folder read, or why none was


def package_dir(python: str | Path, root: Path) -> Path | None:
    """site-packages/vllm of the environment whose interpreter is `python` (relative to root)."""
    env = (root / python).parent.parent if not Path(python).is_absolute() else Path(python).parent.parent
    found = sorted(env.glob("lib/python3*/site-packages/vllm/config/cache.py"))
    return found[-1].parent.parent if found else None


def _literal(text: str, name: str) -> tuple[str, ...]:
    m = re.search(rf"{name}[^=\n]*=\s*(?:Literal)?\[(.*?)\]", text, re.S)
    return tuple(re.findall(r'"([^"]+)"', m.group(1))) if m else ()


def installed(python: str | Path, root: Path = Path(".")) -> Installed | None:
    """The installed vLLM's KV dtypes; None where no vLLM is installed beside `python`."""
    pkg = package_dir(python, root)
    if pkg is None:
        return None
    cache = _literal((pkg / "config" / "cache.py").read_text(encoding="utf-8"), "CacheDType")
    cpu_file = pkg / "v1" / "attention" / "backends" / "cpu_attn.py"
    cpu = _literal(cpu_file.read_text(encoding="utf-8"), "supported_kv_cache_dtypes") if cpu_file.is_file() else ()
    version_file = pkg / "_version.py"
    m = re.search(r"__version__ = version = '([^']+)'",
                  version_file.read_text(encoding="utf-8")) if version_file.is_file() else None
    return Installed(m.group(1) if m else "unknown", cache, cpu, str(pkg))
