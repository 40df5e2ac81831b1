"""The test tiers mean what they say (tests/tiers.py): a unit module imports no torch, not even through
the pipeline modules it imports; a module that builds the tiny model or runs DVC is not unit; and a
unit-only run really makes `import torch` fail, in its own process and in the subprocesses it starts.

    python -m pytest tests/test_tiers.py -q        (the e2e test here runs the whole unit tier blocked)
"""
from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path

import pytest

from tests import tiers
from tests.conftest import ROOT

# Imports that load torch when executed (a library importing it at its own top level counts).
HEAVY_IMPORTS = ("torch", "transformers", "llmcompressor", "compressed_tensors", "bitsandbytes", "accelerate",
                 "vllm", "safetensors.torch", "lm_eval.models")
LOCAL = ("pipeline", "tests")


def is_heavy(name: str) -> bool:
    return any(name == h or name.startswith(h + ".") for h in HEAVY_IMPORTS)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@lru_cache(maxsize=None)     # every test module's chain walks the same pipeline modules again
def top_level_imports(source: str) -> tuple[str, ...]:
    """Every module an import executes when the file is imported: imports outside functions (class
    bodies and top-level if/try included), each with its parent packages."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or _type_checking(child):
                continue
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module] + [f"{child.module}.{a.name}" for a in child.names]
            for n in names:
                parts = n.split(".")
                found.extend(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            visit(child)

    visit(ast.parse(source))
    return tuple(dict.fromkeys(found))


def local_file(name: str, root: Path) -> Path | None:
    """The file a local (pipeline or tests) module name executes; None for a name that is not one
    (a third-party module, or `from pkg import some_function`)."""
    if name.split(".")[0] not in LOCAL:
        return None
    base = root.joinpath(*name.split("."))
    for f in (base / "__init__.py", base.with_suffix(".py")):
        if f.is_file():
            return f
    return None


def torch_chain(path: Path, root: Path) -> list[str] | None:
    """The import chain by which importing `path` loads torch (file, local modules..., heavy import),
    or None when it does not at import time."""
    seen = {path}
    queue: list[tuple[Path, list[str]]] = [(path, [str(path.relative_to(root))])]
    while queue:
        f, chain = queue.pop(0)
        for name in top_level_imports(f.read_text()):
            if is_heavy(name):
                return chain + [name]
            dep = local_file(name, root)
            if dep is not None and dep not in seen:
                seen.add(dep)
                queue.append((dep, chain + [name]))
    return None


def _marked_heavy(fn: ast.FunctionDef) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.attr in tiers.HEAVY
               for d in fn.decorator_list for sub in ast.walk(d))


def unit_tests_needing_more(source: str) -> list[str]:
    """Unit tests (in a module without a heavy pytestmark, not marked themselves) that build the tiny
    model or run DVC: the names of such tests."""
    if tiers.module_tiers(source):
        return []
    bad = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and not _marked_heavy(node):
            body = list(ast.walk(node))
            if any(isinstance(n, ast.Name) and n.id == "tiny_model" for n in body) or \
                    any(isinstance(n, ast.Constant) and n.value == "dvc" for n in body):
                bad.append(node.name)
    return bad


def suite_files() -> list[Path]:
    return sorted((ROOT / "tests").glob("test_*.py"))


def test_unit_modules_import_no_torch():
    bad = []
    for f in suite_files():
        if not tiers.module_tiers(f.read_text()) and (chain := torch_chain(f, ROOT)):
            bad.append(" -> ".join(chain))
    assert not bad, ("unit test modules that import torch (mark them `pytestmark = pytest.mark.model`, or move "
                     "the torch-free code out of the module that needs torch):\n" + "\n".join(bad))


def test_tiny_model_and_dvc_tests_are_not_unit():
    bad = [f"{f.name}::{name}" for f in suite_files() for name in unit_tests_needing_more(f.read_text())]
    assert not bad, "tests that build the tiny model or run DVC must be marked model or e2e:\n" + "\n".join(bad)


def test_the_checks_above_can_fail(tmp_path):
    (tmp_path / "pipeline" / "heavy").mkdir(parents=True)
    (tmp_path / "pipeline" / "__init__.py").write_text("")
    (tmp_path / "pipeline" / "heavy" / "__init__.py").write_text("from pipeline.heavy.engine import run\n")
    (tmp_path / "pipeline" / "heavy" / "engine.py").write_text("import torch.nn\n\ndef run(): ...\n")
    (tmp_path / "pipeline" / "heavy" / "pure.py").write_text("def f():\n    import torch\n")
    (tmp_path / "pipeline" / "light.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                    "    import torch\n")
    test = tmp_path / "tests" / "test_x.py"
    test.parent.mkdir()
    test.write_text("from pipeline.heavy import pure\n")           # the package's __init__ runs first
    assert torch_chain(test, tmp_path) == ["tests/test_x.py", "pipeline.heavy", "pipeline.heavy.engine", "torch"]
    test.write_text("from pipeline import light\nfrom pipeline.heavy.pure import f\n")
    assert torch_chain(test, tmp_path) is not None                  # pipeline.heavy's __init__ again
    test.write_text("from pipeline import light\n")
    assert torch_chain(test, tmp_path) is None                      # function-level and TYPE_CHECKING imports
    source = ("import pytest\nfrom tests import tiny_model\n\ndef test_a(tmp_path):\n    tiny_model.build(tmp_path)\n\n"
              "@pytest.mark.e2e\ndef test_b():\n    run(['dvc', 'repro'])\n\ndef test_c():\n    run(['dvc', 'repro'])\n")
    assert unit_tests_needing_more(source) == ["test_a", "test_c"]
    assert unit_tests_needing_more("import pytest\npytestmark = pytest.mark.model\n" + source) == []


def test_module_tiers_read_without_importing():
    assert tiers.module_tiers("import pytest\npytestmark = pytest.mark.model\n") == {"model"}
    assert tiers.module_tiers("import pytest\npytestmark = [pytest.mark.e2e, pytest.mark.skipif(1, reason='x')]\n") \
        == {"e2e"}
    assert tiers.module_tiers("import pytest\n\n@pytest.mark.model\ndef test_a(): ...\n") == set()


@pytest.mark.parametrize("markexpr, blocked", [
    ("unit", True), ("not slow", True), ("not model and not e2e", True), ("unit and not e2e", True),
    ("", False), ("model", False), ("e2e", False), ("slow", False), ("unit or model", False), ("not unit", False),
    ("not e2e", False),
])
def test_which_runs_block_torch(markexpr, blocked):
    assert tiers.unit_only(markexpr) is blocked


def test_every_test_gets_exactly_one_tier(request):
    """Checked on this session's own items: unit xor (model or e2e), and slow exactly on the latter."""
    bad = []
    for item in request.session.items:
        names = {m.name for m in item.iter_markers()}
        heavy = names & set(tiers.HEAVY)
        if ("unit" in names) == bool(heavy) or ("slow" in names) != bool(heavy):
            bad.append(f"{item.nodeid}: {sorted(names & {'unit', 'model', 'e2e', 'slow'})}")
    assert not bad, "\n".join(bad)


BLOCKED = "torch is blocked in the unit test tier"


def test_a_unit_run_blocks_torch_here_and_in_its_subprocesses(request, tmp_path):
    if not request.config.qtier_unit_only:
        # this run may import torch: check the blocking in a unit-only run of this very test
        run = subprocess.run([sys.executable, "-m", "pytest", "-m", "unit", "-q", "-p", "no:cacheprovider",
                              f"--basetemp={tmp_path / 'inner'}", f"{__file__}::{request.node.name}"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
        return
    assert "torch" not in sys.modules
    assert importlib.util.find_spec("torch") is not None           # libraries probing for torch still find it
    with pytest.raises(ImportError, match=BLOCKED):
        import torch  # noqa: F401
    child = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, timeout=60)
    assert child.returncode != 0 and BLOCKED in child.stderr


@pytest.mark.parametrize("markexpr, given, in_worker, collect_only, cpus, workers", [
    ("unit", None, False, False, 2, 2),
    ("not slow", None, False, False, 8, 2),
    ("unit", None, False, False, 1, 1),
    ("unit", 0, False, False, 2, None),          # -n 0: the user's choice stands
    ("unit", None, True, False, 2, None),        # inside a worker: never again
    ("unit", None, False, True, 2, None),        # --collect-only
    ("model", None, False, False, 2, None),      # heavy tiers stay serial
    ("", None, False, False, 2, None),           # the full suite (CI)
    ("unit or e2e", None, False, False, 2, None),
])
def test_only_a_unit_run_gets_two_workers(markexpr, given, in_worker, collect_only, cpus, workers):
    assert tiers.unit_workers(markexpr, given, in_worker, collect_only, cpus) == workers


@pytest.mark.e2e
def test_the_unit_tier_passes_with_torch_blocked(tmp_path):
    """`pytest -m unit`, the whole tier, in a fresh process: every unit test passes without torch.
    (A unit-only run checks this by itself; this test makes a full run check it too.)"""
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-m", "unit", "-q", "-p", "no:cacheprovider",
                          f"--basetemp={tmp_path / 'inner'}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    tail = "\n".join(run.stdout.splitlines()[-15:])
    assert run.returncode == 0, tail + run.stderr
    print(f"unit tier: {time.monotonic() - t0:.1f} s wall; {run.stdout.splitlines()[-1]}")
