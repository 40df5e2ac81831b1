"""Fan-out on DVC's run-cache as docs/scale-out.md shows it (scripts/fan_out.py): the upstream once, two
workers each computing half of the evaluate stages, and an aggregator whose `dvc repro` computes no
evaluation; its decision.md is the sequential run's but for the time stamp line. Clones of one commit
share a local-directory DVC remote (e2e: DVC on a tiny random model, a few minutes)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests import tiny_model
from tests.test_pipeline_e2e import init_project, run, small_params

pytestmark = pytest.mark.e2e
GIT = ["git", "-c", "user.name=qtier", "-c", "user.email=qtier@localhost"]


@pytest.fixture(scope="module")
def origin(tmp_path_factory, request) -> Path:
    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp("fan") / "origin"
    proj.mkdir()
    tiny_model.build(proj / "tiny-model", root)
    p = small_params(root, {"tiny": {"source": "local:tiny-model", "dtype": "float16"}})
    p["tiers"] = {t: p["tiers"][t] for t in ("fp16", "int8")}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}         # two evaluate stages: one a worker
    init_project(proj, root, p)             # scripts/ with it: fan_out.py, and dvc_deps.py for stage code
    for cmd in (["dvc", "remote", "add", "-d", "shared", str(proj.parent / "remote")], GIT + ["add", "-A"],
                GIT + ["commit", "-qm", "the project"]):
        r = run(cmd, proj)
        assert r.returncode == 0, r.stderr
    return proj


def clone(origin: Path, name: str) -> Path:
    dst = origin.parent / name
    assert run(["git", "clone", "-q", str(origin), str(dst)], origin.parent).returncode == 0
    return dst


def fan_out(proj: Path, *args: str) -> str:
    r = run([sys.executable, "-m", "scripts.fan_out", *args], proj)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


def differing(a, b, at: str = "") -> list[str]:
    """The paths of the leaves where two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in differing(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in differing(x, y, f"{at}[{i}]")]
    return [] if a == b else [at]


def ran(output: str) -> list[str]:
    return sorted(set(re.findall(r"Running stage '([^']+)'", output)))


def test_two_workers_and_an_aggregator_make_the_sequential_decision(origin):
    up = clone(origin, "upstream")
    first = ran(fan_out(up, "upstream"))
    assert "baseline@tiny" in first and not [s for s in first if s.startswith(("evaluate@", "decide"))]
    a = ran(fan_out(clone(origin, "worker-a"), "worker", "0", "2"))
    b = ran(fan_out(clone(origin, "worker-b"), "worker", "1", "2"))
    # each worker computes its own half and restores the upstream from the remote's run-cache (check,
    # whose outputs persist, runs anywhere in a second)
    evaluated = [s for s in a + b if s.startswith("evaluate@")]
    assert len(evaluated) == len(set(evaluated)) == 2 and set(a) - {"check"} and set(b) - {"check"}
    assert set(a + b) - set(evaluated) <= {"check"}
    agg = clone(origin, "aggregator")
    out = fan_out(agg, "aggregate")
    print("aggregator:", *[x for x in out.splitlines() if x.startswith(("Running stage", "Stage "))], sep="\n  ")
    assert set(ran(out)) <= {"check", "decide"} and "decide" in ran(out), out[-3000:]
    # the sequential run, in the upstream's clone: its own cache holds none of the workers' stages
    r = run(["dvc", "repro"], up)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert sorted(s for s in ran(r.stdout) if s.startswith("evaluate@")) == sorted(evaluated)
    one, two = ((p / "results/decision.md").read_text().splitlines() for p in (up, agg))
    assert len(one) == len(two)
    assert [x for x, y in zip(one, two) if x != y and not (x.startswith("Generated ") and y.startswith("Generated "))] == []
    # decision.json alike but for what was timed (a worker timed its own stages; `w8a8_gemm` is which of two
    # bit-identical int8 GEMMs a session's own timing picked, pipeline/engines/reference/w8a8_gemm.fastest_impl)
    j1, j2 = (json.loads((p / "results/decision.json").read_text()) for p in (up, agg))
    timed = {"generated", "gen_tokens_per_s", "seconds", "phases", "w8a8_gemm", "w8a8_gemm_ms", "throughput"}
    print("decision.json, sequential vs aggregated, differing leaves:", differing(j1, j2))
    assert [p for p in differing(j1, j2) if not timed & set(re.split(r"[.\[\]]", p))] == []
