"""Do two backends agree? The same variants evaluated twice - e.g. by the reference backend
(transformers) and by a vLLM server - compared sample by sample: for each variant and metric,
B - A with its paired interval (the method its kind gets, at decision.confidence from params.yaml). "within noise"
when the interval contains 0. Two runs of one backend should give exactly 0 (a determinism check).

    python -m pipeline.backend_diff <results dir A> <results dir B> [--out diff.md] [--label-a X --label-b Y]

Each results dir is a `results/` folder of a finished run (evals/<model>/<variant>/result.json and
samples/*.jsonl). Variants that are not "ok" in both are listed with their status, never compared.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from pipeline import io, paths, schema
from pipeline.domain.result import contract
from pipeline.domain.sets import task_rows
from pipeline.domain.sets.metrics import metric_id, split_id
from pipeline.scoring.estimators import analysis
from pipeline.scoring.estimators.stats import Interval
from pipeline.domain.sets.sample_row import SampleRow


@dataclass(frozen=True)
class Run:
    backend: str
    status: str
    reason: str | None
    metrics: dict[str, float]                  # `<task>/<metric>` -> score
    samples: dict[str, list[SampleRow]]         # task -> per-sample rows
    kv_rounding: str | None = None             # how its fp8 KV cache rounded K/V; None: no fp8 cache


def kv_rounding(res: contract.Result) -> str | None:
    """How a result's fp8 KV cache rounded K/V: the engine's own, read by the vLLM backend
    (serving.kv_write), or the reference's simulation (to nearest, as a GPU). Pure."""
    s = res.serving
    written = s.kv_write.rounding if s is not None and s.kv_write is not None else None
    if written:
        return written
    if res.backend == "reference" and s is not None and (s.kv_cache or "").startswith("fp8"):
        return "nearest"
    return None


def load_run(variant_dir: Path) -> Run | None:
    result = variant_dir / paths.RESULT_FILE
    if not result.is_file():
        return None
    res = contract.load(result)
    return Run(res.backend or "?", res.status, res.reason, res.metrics, task_rows.read_samples(variant_dir),
               kv_rounding(res))


def diff(a: Run, b: Run, confidence: float) -> dict[str, Interval]:
    """`<task>/<metric>` -> interval of B - A over the samples both scored."""
    out: dict[str, Interval] = {}
    for task in a.samples:
        if task not in b.samples:
            continue
        both = [split_id(mid)[1] for mid in a.metrics if split_id(mid)[0] == task and mid in b.metrics]
        # runs at different limits (e.g. two releases' default runs) compare on the samples both have
        common = {r.doc_id for r in a.samples[task]} & {r.doc_id for r in b.samples[task]}
        pairs = analysis.align([r for r in a.samples[task] if r.doc_id in common],
                               [r for r in b.samples[task] if r.doc_id in common])
        out.update({metric_id(task, m): iv for m, iv in analysis.intervals(both, pairs, confidence).items()})
    return out


def verdict(iv: Interval) -> str:
    # no sample scored differently (a graded metric's interval has a floor: its width proves nothing here)
    if iv.discordant == (0, 0) or (iv.graded is not None and iv.graded.changed == 0) or iv.lo == iv.hi == 0:
        return "identical"
    return "within noise" if iv.lo <= 0 <= iv.hi else "differs"


def compare_dirs(dir_a: Path, dir_b: Path, confidence: float) -> list[tuple[str, str, str, dict]]:
    """(model, variant, note, {metric: interval}) for every variant either run has."""
    rows = []
    variants = sorted({p.relative_to(d / paths.EVALS) for d in (dir_a, dir_b)
                       for p in (d / paths.EVALS).glob("*/*") if p.is_dir()})
    for rel in variants:
        a, b = load_run(dir_a / paths.EVALS / rel), load_run(dir_b / paths.EVALS / rel)
        model, variant = rel.parts
        if a is None or b is None:
            rows.append((model, variant, f"only in {'B' if a is None else 'A'}", {}))
        elif a.status != "ok" or b.status != "ok":
            reason = (b.reason or a.reason or "").strip().splitlines()
            note = f"A {a.status}, B {b.status}" + (f": {reason[0][:160]}" if reason else "")
            rows.append((model, variant, note.replace("|", "/"), {}))
        else:
            note = f"A {a.backend}, B {b.backend}"
            if a.kv_rounding != b.kv_rounding:
                # a known cause of a difference, said beside it (docs/kv-cache.md)
                note += f"; fp8 K/V rounded: A {a.kv_rounding or '?'}, B {b.kv_rounding or '?'}"
            rows.append((model, variant, note, diff(a, b, confidence)))
    return rows


def describe(results_dir: Path) -> str:
    """What a run is, from its own results (backends, engines, machines), never from where it lies:
    the folder is a path on the machine that made it."""
    backends, machines = set(), set()
    for f in sorted((results_dir / paths.EVALS).glob(f"*/*/{paths.RESULT_FILE}")):
        res = contract.load(f)
        if res.backend:
            backends.add(res.backend)
        if res.measured_on is not None:
            cpu = res.measured_on.cpu
            machines.add(f"{cpu.model} ({', '.join(cpu.isa) or 'no AVX2'})")
    where = "; ".join(sorted(machines)) or "machine not recorded"
    return f"{'/'.join(sorted(backends)) or 'no backend recorded'} on {where}"


def render(rows: list[tuple[str, str, str, dict]], label_a: str, label_b: str, confidence: float) -> str:
    metrics = sorted({m for *_, ivs in rows for m in ivs})
    lines = [f"# Backend comparison: B ({label_b}) minus A ({label_a})", "",
             f"Paired {confidence:.0%} intervals over the same samples (each metric's method: docs/decision-rule.md); "
             "cell: `delta [lo, hi] verdict`.", "",
             "| Model | Variant | Runs | " + " | ".join(metrics) + " |",
             "|---|---|---|" + "---|" * len(metrics)]
    for model, variant, note, ivs in rows:
        cells = [f"{ivs[m].delta:+.2f} [{ivs[m].lo:+.2f}, {ivs[m].hi:+.2f}] {verdict(ivs[m])}" if m in ivs else "–"
                 for m in metrics]
        lines.append(f"| {model} | {variant} | {note} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--label-a", help="what run A is (default: its backends and machines, from its results)")
    ap.add_argument("--label-b", help="what run B is (default: as for A)")
    args = ap.parse_args(argv)
    for d in (args.a, args.b):
        if not (d / paths.EVALS).is_dir():
            print(f"qtier: error: {d}: no evals/ folder (expected a results/ dir of a finished run)", file=sys.stderr)
            sys.exit(2)
    confidence = schema.load_or_exit().decision.confidence
    try:
        text = render(compare_dirs(args.a, args.b, confidence), args.label_a or describe(args.a),
                      args.label_b or describe(args.b), confidence)
    except io.DataError as e:           # a result of another qtier version, a partial one: one line
        print(f"qtier: error: {e}", file=sys.stderr)
        sys.exit(2)
    if args.out:
        io.atomic_write_text(args.out, text)
    print(text)


if __name__ == "__main__":
    main()
