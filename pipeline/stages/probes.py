"""Stage probes@<model>: the probe sets of eval.tasks (`data: retrieval:<tokens>`) written with the
model's own tokenizer, so each prompt is <tokens> tokens of this model (pipeline/domain/sets/probe_sets.py).

    python -m pipeline.stages.probes <model>

Writes artifacts/<model>/probes/<task>.jsonl per probe set and sets.json (each set's tokens and
samples, and the longest prompt measured). A set whose prompt, answer and chat template do not fit the
model's context (config.json max_position_embeddings; on vLLM also serving.vllm.max_model_len) stops
the stage with one line naming the task, before any variant runs.

With eval.long_context it also checks the long texts in this model's tokens, as fidelity_base will
read them (pipeline/domain/sets/long_texts.py: a short text continued with the next ones), and writes
long_texts.json: the positions read, and per text its own token count, the rows joined and where each
begins. A text that cannot reach the length stops the stage with one line naming it. DVC runs this
stage before the model's quantize stages (their order in dvc.yaml), so a vocabulary too large for the
texts costs seconds, not a quantized baseline.
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from pipeline import io, paths, schema
from pipeline.domain.model import bos
from pipeline.domain.sets import long_texts, probe_sets, retrieval, tasks
from pipeline.stages import runner


def context_of(source: Path) -> int | None:
    """The model's context in tokens (max_position_embeddings), None when its config does not say."""
    cfg = json.loads((source / "config.json").read_text())
    found = cfg.get("max_position_embeddings") or (cfg.get("text_config") or {}).get("max_position_embeddings")
    return int(found) if found else None


@functools.cache
def tokenizer(source: Path):
    from transformers import AutoTokenizer     # lazy: seconds of imports

    return AutoTokenizer.from_pretrained(source)


def write(wanted: dict[str, probe_sets.ProbeSet], source: Path, out: Path) -> dict[str, dict]:
    """Each set's <task>.jsonl in `out`, counted with the tokenizer in `source`, and sets.json: task ->
    its tokens, samples and the longest prompt as that tokenizer counts it."""
    written = {}
    if wanted:
        tok = tokenizer(source)
        count = lambda text: len(tok(text, add_special_tokens=False).input_ids)  # noqa: E731
        for name, spec in wanted.items():
            rows = probe_sets.rows(spec, count)
            retrieval.write_jsonl(rows, out / f"{name}.jsonl")
            written[name] = {"tokens": spec.tokens, "samples": len(rows), "longest_prompt": max(r.tokens for r in rows)}
    io.atomic_write_json(out / "sets.json", written)
    return written


def long_record(params: schema.Params, source: Path, add_bos: bool) -> dict:
    """eval.long_context's texts as fidelity_base will read them with the tokenizer in `source` (its
    positions as long_texts.probe_positions caps them): {"positions", "texts": id -> Joined.record()};
    {} without eval.long_context. A text too short even joined is a DataError naming it."""
    lc = params.eval.long_context
    if lc is None:
        return {}
    engine_len = None if params.serving.backend == "reference" else params.serving.vllm.max_model_len - 2
    n = long_texts.probe_positions(lc.positions, context_of(source), params.memory.max_model_len, engine_len)
    tok = tokenizer(source)
    rows = long_texts.texts(lc.data, lc.field, lc.texts)
    found = long_texts.joined(rows, lc.texts, lambda text: bos.encode(tok, text, add_bos), n)
    return {"positions": n, "texts": {j.ids[0]: j.record() for j in found}}


@runner.stage_main("probes", ("model",))
def main(st: runner.Stage) -> None:
    model, params = st.args[0], st.params
    source = paths.source_dir(model)
    wanted = {name: probe_sets.parse(f"eval.tasks.{name}.data", t.data)
              for name, t in params.eval.tasks.items() if probe_sets.is_probe_set(t.data)}
    limit, what = probe_sets.room(context_of(source), params.serving.backend, params.serving.vllm.max_model_len)
    for name, spec in wanted.items():
        answer = tasks.max_gen_toks(tasks.declared_config(params.eval.tasks[name], Path(".")))
        if why := probe_sets.misfit(name, spec, answer, limit, what):
            print(f"qtier: {model}: {why}", file=sys.stderr)
            raise SystemExit(2)
    try:
        long = long_record(params, source, bos.recorded(model, source)) if params.eval.long_context else {}
    except io.DataError as e:
        print(f"qtier: {model}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    with io.AtomicDir(paths.probes_dir(model)) as tmp:
        written = write(wanted, source, tmp)
        io.atomic_write_json(tmp / "long_texts.json", long)
    said = [f"{n} {w['samples']} prompts of {w['tokens']:,} tokens" for n, w in written.items()]
    if long:
        said.append(f"long texts of {long['positions'] + 1:,} tokens: "
                    + ", ".join(f"{t} ({r['tokens_alone']:,} alone" + (f", + {', '.join(r['rows'][1:])})" if
                                len(r["rows"]) > 1 else ")") for t, r in long["texts"].items()))
    st.done("ok", ", ".join(said) or "no probe set in eval.tasks")


if __name__ == "__main__":
    main()
