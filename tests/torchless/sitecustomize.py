"""Makes `import torch` raise in this interpreter: installed by tests/conftest.py in a unit-only run
(`pytest -m unit`), and in every Python subprocess such a run starts (this folder is put first on
PYTHONPATH, so Python imports this file at startup).

`importlib.util.find_spec("torch")` still finds it, as libraries that probe for torch expect; only
executing the import fails, so a unit test that imports torch, directly or through a library, fails
with the line below instead of passing slowly.
"""
import importlib.abc
import importlib.machinery
import sys

MESSAGE = "torch is blocked in the unit test tier: mark the test model or e2e (tests/conftest.py)"


class _Refuse(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError(f"{MESSAGE} [import {module.__name__}]")


class TorchBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.machinery.ModuleSpec(name, _Refuse())
        return None


if not any(isinstance(f, TorchBlocker) for f in sys.meta_path):
    sys.meta_path.insert(0, TorchBlocker())
