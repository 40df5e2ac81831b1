"""The module graph is one-way: schema -> io/paths -> domain (hardware, sets -> result -> model) ->
scoring (planning -> estimators -> verdict -> pick -> simulation) / quant / engines (base -> reference,
vllm -> endpoint -> llama_cpp -> selection) -> evaluation -> config -> report -> stages; an engine reads no verdict
(engines never import scoring), and the reference engine and vLLM import nothing of each other.

Fast: reads the source with ast, imports nothing of the pipeline.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "pipeline"

# Layer of each module or package; a module may import only from its own layer or lower ones.
LAYERS = [
    ("pipeline.schema",),
    ("pipeline.errors", "pipeline.paths", "pipeline.io", "pipeline.runlog"),
    # domain's rooms: hardware and sets need no other room; result reads the machine; model reads the
    # records and the KV formats
    ("pipeline.domain", "pipeline.domain.hardware", "pipeline.domain.sets"),
    ("pipeline.domain.result",),
    ("pipeline.domain.model",),
    # scoring's rooms, lowest first: planning (power, time, memory) needs no other room; estimators; the
    # sequential design and verdict; the pick; simulation replays all of them
    ("pipeline.scoring", "pipeline.scoring.planning"),
    ("pipeline.scoring.estimators",),
    ("pipeline.scoring.verdict",),
    ("pipeline.scoring.pick",),
    ("pipeline.scoring.simulation", "pipeline.quant", "pipeline.engines.base"),
    # the engines' rooms: reference and vllm, apart (below); the endpoint, evaluated through vllm's client;
    # selection picks one of them
    ("pipeline.engines.reference", "pipeline.engines.vllm"),
    ("pipeline.engines.endpoint",),
    ("pipeline.engines.llama_cpp",),        # llama.cpp's server, judged through the endpoint path
    ("pipeline.engines",),
    ("pipeline.evaluation",),
    ("pipeline.config",),
    ("pipeline.report",),
    ("pipeline.stages", "pipeline.backend_diff", "pipeline.params_doc", "pipeline.budget"),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def imports(path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported pipeline module, line, inside a function) for every import in the file."""
    tree = ast.parse(path.read_text())
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [f"{child.module}.{a.name}" if f"{child.module}.{a.name}" in known else child.module
                         for a in child.names]
            for n in names:
                if n.startswith("pipeline"):
                    found.append((n, child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def layer(name: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{name} belongs to no layer: add it to LAYERS")


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: {n for n, _, _ in imports(p, known) if n in known and n != m} for m, p in mods.items()}


def test_every_module_has_a_layer():
    for m in modules():
        if m != "pipeline":
            layer(m)


def test_imports_flow_one_way():
    bad = []
    for m, deps in graph().items():
        if m == "pipeline":
            continue
        for d in deps:
            if d == "pipeline" or d.startswith(m + "."):   # a package importing its own modules
                continue
            if layer(d) > layer(m):
                bad.append(f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(g.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (found := dfs(d)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state and (found := dfs(m)):
            return found
    return None


def test_no_cycles():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_function_level_pipeline_imports():
    """A function-level import of a pipeline module is how cycles get hidden; there are none."""
    known = set(modules())
    lazy = [f"{p.relative_to(ROOT)}:{line} imports {n}" for m, p in modules().items()
            for n, line, inside in imports(p, known) if inside]
    assert not lazy, "\n".join(lazy)


def test_schema_imports_nothing_from_the_pipeline():
    """The schema package imports only its own modules."""
    known = set(modules())
    outside = [f"{p.relative_to(ROOT)} imports {n}" for p in (PKG / "schema").rglob("*.py")
               for n, _, _ in imports(p, known) if not (n == "pipeline.schema" or n.startswith("pipeline.schema."))]
    assert list((PKG / "schema").glob("*.py")), "pipeline/schema/ is missing"
    assert not outside, "\n".join(outside)


# pairs in one layer that may not import each other: an engine serves tokens and reads no verdict; the
# reference engine and vLLM share only base (vLLM's fp8 KV write runs the reference's rounding check in
# vLLM's own process, by name, engines/vllm/kv_write.py)
APART = [("pipeline.engines", "pipeline.scoring"),
         ("pipeline.engines.reference", "pipeline.engines.vllm"), ("pipeline.engines.vllm", "pipeline.engines.reference")]


def apart_violations(g: dict[str, set[str]]) -> list[str]:
    return [f"{m} imports {d}" for m, deps in g.items() for d in deps
            for low, high in APART if m.startswith(low + ".") and (d == high or d.startswith(high + "."))]


def test_the_engines_read_no_verdict():
    assert not apart_violations(graph()), "\n".join(apart_violations(graph()))


def test_the_apart_rule_sees_an_engine_importing_scoring():
    fake = {"pipeline.engines.x": {"pipeline.scoring.estimators.stats"}, "pipeline.evaluation.y": {"pipeline.scoring.estimators.stats"}}
    assert apart_violations(fake) == ["pipeline.engines.x imports pipeline.scoring.estimators.stats"]


def test_every_module_of_engines_and_domain_has_a_room():
    """engines/ and domain/ keep at their top only what every room shares; each other module has a room."""
    assert sorted(p.name for p in (PKG / "engines").glob("*.py")) == ["__init__.py", "base.py", "selection.py"]
    assert sorted(p.name for p in (PKG / "domain").glob("*.py")) == ["__init__.py"]
    for room in ("engines/reference", "engines/vllm", "engines/endpoint", "engines/llama_cpp",
                 "domain/hardware", "domain/sets", "domain/result", "domain/model"):
        assert (PKG / room / "__init__.py").exists(), room


def test_scoring_module_names_are_unique_across_its_rooms():
    """A module's name says its job: no two modules in pipeline/scoring share one (they once had two
    budget.py and two selection.py between them and the rest of the pipeline)."""
    names = [p.stem for p in (PKG / "scoring").rglob("*.py") if p.stem != "__init__"]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    clash = {p.stem for p in PKG.rglob("*.py") if "scoring" not in p.parts} & set(names)
    # a report module named for what it renders (report/noise.py shows scoring's noise) is the one exception
    assert not {n for n in clash if not (PKG / "report" / f"{n}.py").exists()}, clash
