"""What DVC spends on dvc.lock per stage, with code deps listed module by module against one code
digest per stage (scripts/dvc_deps.py), and with ruamel's C parser against its pure-Python one.

    python -m benchmarks.dvc_lock [--stages 30]

Builds a dvc.lock of `--stages` stages shaped as this repo's dvc.yaml makes them (each stage's code
deps both ways, plus 10 data deps), with made-up hashes, and times DVC's own functions on it: the
safe load of `dvc status`/`repro` (C parser where ruamel.yaml.clib is installed, else pure Python),
and the round-trip load + dump DVC does after every stage it runs ("Updating lock file": always pure
Python). Prints seconds (the best of 3, benchmarks/timing.py) and the ratio; measured on this
machine, in this run.
"""
from __future__ import annotations

import argparse
import io
from itertools import cycle

from dvc.utils.serialize._yaml import _dump, parse_yaml, parse_yaml_for_update
from ruamel.yaml import YAML

from benchmarks.timing import best_of
from pipeline.domain.hardware.machine import cpu_info, describe
from pipeline.schema.yaml_io import safe_load
from scripts.dvc_deps import CODE, ROOT, code_files


def lock_text(per_stage: list[list[str]], stages: int) -> str:
    entries = {}
    for i, code in zip(range(stages), cycle(per_stage)):
        deps = [{"path": p, "hash": "md5", "md5": f"{i:032x}", "size": 1000 + i}
                for p in code + [f"artifacts/data-{k}" for k in range(10)]]
        entries[f"stage-{i}"] = {"cmd": f"python -m pipeline.stages.s {i}", "deps": deps,
                                 "outs": [{"path": f"results/{i}", "hash": "md5", "md5": f"{i:032x}", "size": 1}]}
    buf = io.StringIO()
    _dump({"schema": "2.0", "stages": entries}, buf)
    return buf.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", type=int, default=30)
    a = ap.parse_args()
    dvc = safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    files = code_files(dvc)
    by_file = list(files.values())
    by_digest = [[f"{CODE}/{stage}.json"] for stage in files]
    print(f"machine: {describe(cpu_info(), False)}; {a.stages} stages; ruamel C parser: {YAML(typ='safe').Parser.__module__}")
    print(f"{'code deps':<12}{'lock KB':>9}{'safe load s':>13}{'pure load s':>13}{'rt load+dump s':>16}")
    rows = {}
    for name, deps in (("by module", by_file), ("by digest", by_digest)):
        text = lock_text(deps, a.stages)
        safe = best_of(lambda: parse_yaml(text, "dvc.lock"))
        pure = YAML(typ="safe", pure=True)
        pure_s = best_of(lambda: pure.load(text))
        data = parse_yaml_for_update(text, "dvc.lock")
        rt = best_of(lambda: parse_yaml_for_update(text, "dvc.lock")) + best_of(lambda: _dump(data, io.StringIO()))
        rows[name] = (len(text) / 1024, safe, pure_s, rt)
        print(f"{name:<12}{len(text) / 1024:>9.0f}{safe:>13.2f}{pure_s:>13.2f}{rt:>16.2f}")
    (kb1, s1, p1, r1), (kb2, s2, p2, r2) = rows["by module"], rows["by digest"]
    print(f"{'ratio':<12}{kb1 / kb2:>9.1f}{s1 / s2:>13.1f}{p1 / p2:>13.1f}{r1 / r2:>16.1f}   (by module / by digest)")
    print(f"C parser against pure Python, by module: {p1 / s1:.1f}x")


if __name__ == "__main__":
    main()
