import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def params_dict():
    import yaml

    return yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)
    return ROOT
