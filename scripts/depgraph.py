"""The package's static import graph: which files running a module executes or reads by location.

    python -m scripts.depgraph pipeline.stages.evaluate     # that module's closure, one file a line

Static (ast, nothing imported): a module's closure is every pipeline module it imports, transitively,
with the package `__init__.py` files Python executes on the way (relative imports resolved), and
every file a module names relative to its own `__file__` (the vLLM launcher script), except those of
pipeline/paths.py: a location there (pipeline/data/vllm_hardware.yaml) is data, a dep of the stages
whose code reads it (scripts/dvc_reads.py), not of every stage that imports paths.py. Imports under
`if TYPE_CHECKING:` never run and are left out. Standard library only.
"""
from __future__ import annotations

import ast
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pipeline"
LOCATIONS = f"{PACKAGE}.paths"     # where stages read and write: its files are reads, not code


def syntax(path: Path) -> ast.Module:
    """The parsed file (cached while it is unchanged)."""
    return _parsed(path, path.stat().st_mtime_ns)


@lru_cache(maxsize=None)
def _parsed(path: Path, mtime_ns: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the package (a package: its __init__.py)."""
    out = {}
    for p in sorted((root / PACKAGE).rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def runtime_nodes(tree: ast.AST):
    """Every node Python may execute: the bodies of `if TYPE_CHECKING:` are left out."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo += node.orelse
            continue
        todo += ast.iter_child_nodes(node)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[tuple[str, str | None]]:
    """(module, name imported from it or None) for one import statement, relative ones resolved."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names]
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        parts = package.split(".")
        parent = ".".join(parts[: len(parts) - node.level + 1])
        base = f"{parent}.{base}" if base else parent
    return [(base, a.name) for a in node.names]


def imported(path: Path, module: str, known: set[str]) -> set[str]:
    """The package's modules that importing `module` (at `path`) executes directly, parents included."""
    return set(_imported(path, path.stat().st_mtime_ns, module, frozenset(known)))


@lru_cache(maxsize=None)
def _imported(path: Path, _mtime_ns: int, module: str, known: frozenset[str]) -> frozenset[str]:
    found: set[str] = set()
    for node in runtime_nodes(syntax(path)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for base, name in import_targets(node, module, path.name == "__init__.py"):
                found.add(base)
                if name is not None and f"{base}.{name}" in known:
                    found.add(f"{base}.{name}")
    return frozenset(m for name in found for m in with_parents(name) if m in known)


def with_parents(name: str) -> list[str]:
    """`a.b.c` -> a, a.b, a.b.c: importing a module runs its packages' __init__ first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def file_refs(path: Path) -> set[Path]:
    """Existing files (besides itself) a module names by a path built from its own __file__."""
    return set(_file_refs(path, path.stat().st_mtime_ns))


@lru_cache(maxsize=None)
def _file_refs(path: Path, _mtime_ns: int) -> frozenset[Path]:
    found = set()
    for node in ast.walk(syntax(path)):
        p = _path_value(node, path)
        if p is not None and p.is_file() and p != path:
            found.add(p)
    return frozenset(found)


def _path_value(node: ast.AST, here: Path) -> Path | None:
    """The path an expression built on __file__ evaluates to (Path(), os.path, /, .parent(s), ...)."""
    if isinstance(node, ast.Name):
        return here if node.id == "__file__" else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
        left = _path_value(node.left, here)
        return None if left is None else left / str(node.right.value)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _path_value(node.value, here)
        return None if inner is None else inner.parent
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
            and isinstance(node.slice, ast.Constant)):
        inner = _path_value(node.value.value, here)
        return None if inner is None else inner.parents[node.slice.value]
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("resolve", "absolute") and not node.args:
        return _path_value(node.func.value, here)
    if not node.args:
        return None
    func = ast.unparse(node.func)
    consts = [a.value for a in node.args[1:] if isinstance(a, ast.Constant)]
    if func in ("Path", "pathlib.Path", "str", "os.fspath", "os.path.abspath", "os.path.realpath"):
        return _path_value(node.args[0], here)
    if func == "os.path.dirname":
        inner = _path_value(node.args[0], here)
        return None if inner is None else inner.parent
    if func == "os.path.join" and len(consts) == len(node.args) - 1:
        inner = _path_value(node.args[0], here)
        return None if inner is None else inner.joinpath(*consts)
    if (isinstance(node.func, ast.Attribute) and node.func.attr in ("with_name", "joinpath")
            and isinstance(node.args[0], ast.Constant)):
        inner = _path_value(node.func.value, here)
        return None if inner is None else getattr(inner, node.func.attr)(node.args[0].value)
    return None


def closure(entry: str, root: Path = ROOT) -> set[Path]:
    """Every file running `python -m entry` executes or reads by its own location."""
    mods = modules(root)
    by_path = {p: m for m, p in mods.items()}
    seen: set[Path] = set()
    todo = [mods[m] for m in with_parents(entry) if m in mods]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path.suffix != ".py":
            continue
        if path in by_path:
            todo += [mods[m] for m in imported(path, by_path[path], set(mods))]
        if by_path.get(path) != LOCATIONS:
            todo += file_refs(path)
    return seen


def fingerprint(entry: str, root: Path = ROOT) -> tuple:
    """Changes when a file of the closure changes: a cache key for analyses of it."""
    return tuple((str(p), p.stat().st_mtime_ns) for p in sorted(closure(entry, root)))


if __name__ == "__main__":
    print("\n".join(sorted(str(p.relative_to(ROOT)) for p in closure(sys.argv[1]))))
