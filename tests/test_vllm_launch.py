"""pipeline/engines/vllm/launch.py's AMX permission request, run in a fresh interpreter (the module
patches importlib.metadata and sys.path at import, which this process must not inherit)."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

LAUNCH = Path(__file__).resolve().parents[1] / "pipeline" / "engines" / "vllm" / "launch.py"
PROBE = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("vllm_launch", {str(LAUNCH)!r})
spec.loader.exec_module(importlib.util.module_from_spec(spec))
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
perm = ctypes.c_uint64(0)
# ARCH_GET_XCOMP_PERM: the xfeatures this process may use; bit 18 is XTILEDATA
print(libc.syscall(158, 0x1022, ctypes.byref(perm)) == 0 and bool(perm.value >> 18 & 1))
"""


def _has_amx() -> bool:
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="arch_prctl is Linux's")
def test_importing_the_launcher_grants_amx_tile_data_exactly_where_the_cpu_has_amx():
    """On an AMX CPU, vLLM's processes may use AMX tiles from the first instruction (without the grant a
    small model's worker died of SIGILL, tests/tiny_model.py); elsewhere the request changes nothing."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(_has_amx())
