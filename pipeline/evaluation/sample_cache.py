"""Per-sample results kept across runs, so that re-running an evaluation computes only what is not
already there: a tolerance change (which re-runs evaluate: its looks stop on the tolerances) reads
every chunk of documents it already computed from here. A chunk is reused only whole and in the same
batch composition (the same documents computed together): documents batched together change each
other's sums, so a raised cap, which moves the looks' boundaries, computes its chunks again rather
than read rows a cold run would not give (tests/test_sample_cache.py runs it cold and warm).

    .qtier-cache/samples/<variant key>/<task key>.jsonl      one row per document, as evaluate logs it
    .qtier-cache/samples/<variant key>/_<measure>-<key>.json  fidelity and the load test (SampleCache.measure)
    .qtier-cache/samples/<variant key>/_<name>-<key>.npz      the baseline's distributions (fidelity_base)

A key hashes everything that determines a sample's output: the served checkpoint's files (content),
the backend, the compute dtype and arithmetic it ran at (the noise stage's is its second one), the KV
mode, the model entry (prompt format), eval's batch size and seed, the whole serving section, this
machine's CPU and ISA, the code that computed it (the pipeline modules the stage imports, and the
task hooks: code_hash), and per task its params entry (but its limit and tolerances: they choose and
judge documents), its YAML and its data file.
Anything else changed is a new key, so a stale row is never read; the cache is never a DVC output
(delete the folder to drop it). An endpoint's answers are not cached: its server may change under it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from pipeline import io, paths
from pipeline.domain.sets import sample_row, task_rows
from pipeline.domain.sets.sample_row import SampleRow
from pipeline.domain.hardware.machine import cpu_info

PACKAGE = Path(__file__).resolve().parents[1]
# besides the modules a stage imports: the task hooks lm-eval imports by path, and vLLM's launcher,
# run by path in vLLM's own environment (engines/vllm/argv.py)
CODE_GLOBS = ("eval_sets/tasks/*.py",)
RUN_BY_PATH = (PACKAGE / "engines" / "vllm" / "launch.py",)


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:24]


@lru_cache(maxsize=64)
def _file_hash(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def files_hash(roots: list[Path], globs: tuple[str, ...] = ("**/*",)) -> str:
    """One hash of every file under `roots` (names relative to each root, and contents)."""
    parts = []
    for root in roots:
        found = sorted({p for g in globs for p in root.glob(g) if p.is_file()} if root.is_dir() else
                       ({root} if root.is_file() else set()))
        for p in found:
            st = p.stat()
            parts.append((str(root), str(p.relative_to(root) if root.is_dir() else p.name),
                          _file_hash(str(p), st.st_size, st.st_mtime_ns)))
    return digest(parts)


def variant_key(params, variant, backend: str, info: dict) -> str:
    """The part of a key the variant, its session and this run's settings make."""
    cpu = cpu_info()
    return digest({"checkpoint": files_hash([Path(variant.checkpoint), Path(variant.serve_path)]),
                   "backend": backend, "compute_dtype": info.get("compute_dtype"),
                   # the noise stage's second arithmetic (reference) or batch composition (vLLM): the
                   # compute dtype alone does not tell bf16 operands from float32
                   "arithmetic": info.get("arithmetic"), "num_concurrent": info.get("num_concurrent"),
                   "kv": dataclasses.asdict(variant.kv_cfg), "model": dataclasses.asdict(variant.model_cfg),
                   "eval": {"batch_size": params.eval.batch_size, "seed": params.eval.seed},
                   "serving": output_settings(params.serving), "machine": [cpu["cpu"], cpu["isa"]],
                   "code": code_hash()})


# serving settings that bound time or shape the load test, not what a request answers: raising a wall
# budget or adding an SLO must not compute the samples again
NOT_OUTPUT = {"slo", "bandwidth_gbps"}
NOT_OUTPUT_VLLM = {"startup_timeout_s", "first_request_timeout_s", "bench", "gpu_bench", "budget"}


def output_settings(serving) -> dict:
    """The part of params.serving that can change a sample's output. Pure."""
    d = {k: v for k, v in dataclasses.asdict(serving).items() if k not in NOT_OUTPUT}
    d["vllm"] = {k: v for k, v in d["vllm"].items() if k not in NOT_OUTPUT_VLLM}
    return d


def code_hash() -> str:
    """One hash of the code that made this process's samples: the pipeline modules it has imported (a
    stage imports its whole closure when it starts: pipeline imports sit at module level,
    tests/test_import_graph.py), the files it runs by path, and the task hooks. A module the stage
    does not import (the report's, decide's) changes no key."""
    loaded = {Path(f).resolve() for m in list(sys.modules.values()) if (f := getattr(m, "__file__", None))}
    mine = {p for p in loaded if p.is_relative_to(PACKAGE)}
    root = PACKAGE.parent
    parts = []
    for p in sorted(mine | {p.resolve() for p in RUN_BY_PATH}):
        st = p.stat()
        parts.append([str(p.relative_to(root)), _file_hash(str(p), st.st_size, st.st_mtime_ns)])
    return digest(parts + [files_hash([Path(".")], CODE_GLOBS)])


# a task's params that choose or judge its documents, not what a document's output is: a raised cap
# or a changed tolerance reads the rows it has
NOT_IN_KEY = ("limit", "tolerances", "min_baseline")


def task_key(task_params: Any, spec_config_path: str | None, data_path: str | None) -> str:
    files = [Path(p) for p in (spec_config_path, data_path) if p]
    entry = dataclasses.asdict(task_params) if dataclasses.is_dataclass(task_params) else dict(task_params)
    return digest({"task": {k: v for k, v in entry.items() if k not in NOT_IN_KEY}, "files": files_hash(files)})


def task_keys(params, specs: list) -> dict[str, str]:
    """task -> its part of a sample's key, for the local tasks (a registry task is not cached)."""
    ts = params.eval.tasks
    # the file the spec was built on: a probe set's is the model's own (tasks.data_file)
    return {s.name: task_key(ts[s.name], ts[s.name].config, s.config["dataset_kwargs"]["data_files"]["test"])
            for s in specs if s.docs is not None}


class SampleCache:
    def __init__(self, key: str, root: Path = paths.SAMPLE_CACHE):
        self.dir = root / key

    def kept(self, name: str, spec: Any, suffix: str, compute: Callable[[], Any],
             save: Callable[[Path, Any], None], load: Callable[[Path], Any]) -> Any:
        """compute()'s value, kept as a file in its writer's own format (`save`/`load`) under `name` and a
        digest of `spec`: computed once per variant key and spec (fidelity_base's distributions)."""
        f = self.dir / f"_{name}-{digest(spec)}{suffix}"
        if f.is_file():
            return load(f)
        value = compute()
        save(f, value)
        return value

    def measure(self, name: str, spec: Any, compute: Callable[[], Any]) -> tuple[Any, str | None]:
        """compute()'s value (JSON), kept under `name` and a digest of `spec` (what besides the variant key
        determines it): (the value, when it was measured if it was read from here, else None)."""
        f = self.dir / f"_{name}-{digest(spec)}.json"
        if f.is_file():
            kept = io.read_json(f)
            return kept["value"], kept["measured_at"]
        value = compute()
        io.atomic_write_json(f, {"value": value, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        return value, None

    def measured(self, name: str, spec: Any, compute: Callable[[], Any], result: dict) -> Any:
        """measure()'s value; a value read from here is recorded in result["reused"] with its date."""
        value, when = self.measure(name, spec, compute)
        if when:
            result.setdefault("reused", {})[name] = when
        return value

    def load(self, task: str) -> dict[int, tuple[SampleRow, str | None]]:
        """doc id -> (its row, the batch composition it was computed in)."""
        f = self.dir / f"{task}.jsonl"
        if not f.is_file():
            return {}
        found = {}
        for n, r in enumerate(io.read_jsonl(f), 1):
            batch = r.pop(BATCH, None)
            row = sample_row.of(r, f"{f}:{n}")
            found[row.doc_id] = (row, batch)
        return found

    def add(self, task: str, rows: list[SampleRow], batch: str) -> None:
        have = {d: {**sample_row.plain(r), BATCH: b} for d, (r, b) in self.load(task).items()}
        have.update({r.doc_id: {**sample_row.plain(r), BATCH: batch} for r in rows})
        io.atomic_write_jsonl(self.dir / f"{task}.jsonl", [have[d] for d in sorted(have)])


BATCH = "_batch"        # a cached row's batch composition: the digest of the documents computed with it


def cached(cache: SampleCache, task_keys: dict[str, str], run: Callable, counts: dict[str, int]) -> Callable:
    """`run` (lm_eval_runner.run_tasks' signature) that reads a chunk of documents from the cache when the
    same chunk was computed before (its batch composition: every document of it, and no other), else
    computes the whole chunk, for the tasks in `task_keys` (the others are run as they are); `counts` gets {"cached": n, "computed": n}
    summed over calls, and "tasks": task -> {"computed": n, "seconds": s} for the tasks that computed any
    (what a sample of each task costs this variant: decide's fixed-n estimate, report/looks.py). A cached
    task's scores are recomputed from its rows (task_rows.scores_from_rows), so a score is the same whether
    its rows were computed now or read."""
    def run_cached(session, specs, ev):
        direct = [s for s in specs if s.name not in task_keys]
        found, samples = run(session, direct, ev) if direct else ({}, {})
        for s in specs:
            if s.name not in task_keys:
                continue
            name = f"{s.name}-{task_keys[s.name]}"
            # a row is reused only from the same batch composition: the documents computed together
            # change each other's sums (padding, shared prefix, kernel blocking), so a row computed
            # beside other documents is not the row a cold run of this chunk would give
            chunk = digest(list(s.doc_ids))
            have = {d: r for d, (r, batch) in cache.load(name).items() if batch == chunk}
            missing = [] if all(d in have for d in s.doc_ids) else list(s.doc_ids)
            counts["cached"] = counts.get("cached", 0) + len(s.doc_ids) - len(missing)
            counts["computed"] = counts.get("computed", 0) + len(missing)
            if missing:
                t0 = time.perf_counter()
                _, rows = run(session, [replace(s, docs=tuple(missing), num_docs=len(missing))], ev)
                spent = counts.setdefault("tasks", {}).setdefault(s.name, {"computed": 0, "seconds": 0.0})
                spent["computed"] += len(missing)
                spent["seconds"] = round(spent["seconds"] + time.perf_counter() - t0, 2)
                cache.add(name, rows[s.name], chunk)
                have.update({r.doc_id: r for r in rows[s.name]})
            rows = [have[d] for d in s.doc_ids]
            found[s.name] = task_rows.TaskResult(task_rows.scores_from_rows(s, rows), rows, dict(s.higher_is_better))
            samples[s.name] = rows
        return found, samples
    return run_cached
