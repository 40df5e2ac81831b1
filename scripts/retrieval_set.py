"""Write the synthetic long-context retrieval suite (pipeline/domain/sets/retrieval.py) for one model's
tokenizer, one JSONL per length, to read it, and print the eval.tasks entries that judge each length
as a task (paired intervals, verdicts, `min_baseline`: a length the baseline cannot do judges no variant).
The pipeline writes the same files for every model itself (`data: retrieval:<tokens>`, stage probes):
the entries name the set, not these files.

    python -m scripts.retrieval_set artifacts/smollm2-135m/source --lengths 1024 2048 4096 --out sets-preview

Lengths count the prompt's own tokens with that tokenizer (no special tokens; a chat template adds its
few). Nothing is downloaded; the same seed writes the same files.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.domain.sets import retrieval


def write_sets(count_tokens: Callable[[str], int], lengths: Sequence[int], depths: Sequence[float], per_cell: int,
               seed: int, tasks: Sequence[str], out: Path) -> dict[int, Path]:
    """length -> the JSONL written for it (every task and depth, `per_cell` samples each)."""
    written = {}
    for n in lengths:
        path = out / f"retrieval_{n}.jsonl"
        retrieval.write_jsonl(retrieval.suite(tasks, [n], depths, per_cell, seed, count_tokens), path)
        written[n] = path
    return written


def entries(lengths: Sequence[int], query: str = "", allowed_drop: float = 5.0, capable: float = 50.0) -> str:
    """The params.yaml lines for eval.tasks, one probe-set task per length (`query`: its options, e.g.
    "per_cell=4"), gated on exact match (decision.tolerances has no exact_match entry: without its own,
    a length would get no verdict)."""
    lines = []
    for n in lengths:
        data = f"retrieval:{n}" + (f"?{query}" if query else "")
        lines += [f"    retrieval_{n}:", "      kind: generate", "      config: eval_sets/tasks/retrieval.yaml",
                  f"      data: \"{data}\"", f"      tolerances: {{exact_match: {{abs: {allowed_drop}}}}}",
                  f"      min_baseline: {{exact_match: {capable}}}     # below it: the baseline cannot do this length"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tokenizer", help="a model folder with its tokenizer (e.g. artifacts/<model>/source)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--depths", type=float, nargs="+", default=[0.1, 0.5, 0.9])
    ap.add_argument("--per-cell", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tasks", nargs="+", default=list(retrieval.TASKS))
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:    # a bad task, depth or count is one line before the tokenizer loads
        retrieval.suite(a.tasks, a.lengths, a.depths, 1, a.seed, len)
    except ValueError as e:
        raise SystemExit(f"qtier: {e}") from None
    from transformers import AutoTokenizer     # lazy: seconds of imports

    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    written = write_sets(lambda s: len(tok(s, add_special_tokens=False).input_ids), a.lengths, a.depths,
                         a.per_cell, a.seed, a.tasks, a.out)
    query = "&".join(f"{k}={v}" for k, v in (("tasks", ",".join(a.tasks)), ("depths", ",".join(map(str, a.depths))),
                                              ("per_cell", a.per_cell), ("seed", a.seed)))
    print(f"wrote {', '.join(str(p) for p in written.values())}; to judge these lengths of every model, add "
          "under eval.tasks in params.yaml:\n")
    print(entries(a.lengths, query))


if __name__ == "__main__":
    main()
