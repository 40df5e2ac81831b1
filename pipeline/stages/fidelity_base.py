"""Stage fidelity_base@<model>: the baseline's next-token distributions on the fidelity texts.

    python -m pipeline.stages.fidelity_base <model>

Serves the baseline (decision.baseline) with the configured backend, tokenizes eval.fidelity's texts
with its tokenizer (at most max_tokens each) and writes results/fidelity/<model>.npz: every text's token
ids and, at each position, the baseline's top-k next-token ids and log-probs (eval.fidelity.top_k), with
the backend and compute dtype that produced them. Each evaluate stage of the model scores the same ids:
on vLLM against these top-k, on the reference backend against the baseline itself, loaded beside the
variant (full vocabulary). Without eval.fidelity the file says so and evaluate reports no fidelity.

With eval.long_context it also writes results/fidelity/<model>-long.npz: the baseline's top-k at every
position of the long texts (the smaller of `positions`, the model's context and memory.max_model_len),
with the position buckets each evaluate reports (the reference backend's full distributions; vLLM's
top-k prompt log-probs where its prefill reads the KV cache, on a CPU; elsewhere the file says why not).
"""
from __future__ import annotations

import dataclasses
import sys

from pipeline import io, paths, schema
from pipeline.engines import Unsupported
from pipeline.evaluation import longctx, sample_cache
from pipeline.engines.base import baseline_variant
from pipeline.engines.selection import select
from pipeline.domain.model import bos
from pipeline.domain.sets import fidelity_set, long_texts
from pipeline.stages import runner


NOT_SET = fidelity_set.Baseline([], [], [], [], {"configured": False})


def baseline_dists(params: schema.Params, model: str) -> tuple[fidelity_set.Baseline, fidelity_set.Baseline]:
    """(the fidelity texts' baseline, the long texts' baseline), from one session of the baseline."""
    from transformers import AutoTokenizer  # lazy: transformers takes seconds to import

    fid, lc = params.eval.fidelity, params.eval.long_context
    base = params.decision.baseline
    variant = baseline_variant(params, model, paths.fidelity_logs(model))
    tokenizer = AutoTokenizer.from_pretrained(variant.serve_path)
    def encode(text: str) -> list[int]:     # as the prompts are, on every backend (models.<name>.add_bos_token)
        return bos.encode(tokenizer, text, variant.add_bos)

    seqs = [ids for t in fidelity_set.texts(fid) if len(ids := encode(t)[: fid.max_tokens]) > 1] \
        if fid is not None else []
    long_rows = long_texts.texts(lc.data, lc.field, lc.texts) if lc is not None else []
    backend = select(params)
    with backend.session(variant) as session:
        # kept per baseline key: a re-run that changed only what evaluates (a cap, a tolerance) reads them
        cache = sample_cache.SampleCache(sample_cache.variant_key(params, variant, backend.name, session.info))
        meta = {"model": model, "tier": base.tier, "kv": base.kv, "backend": backend.name,
                "compute_dtype": session.info.get("compute_dtype"), "full_logits": session.full_logits}

        def short_dists() -> fidelity_set.Baseline:
            dists = session.token_dists(seqs, fid.top_k)
            return fidelity_set.Baseline(seqs, [d.ids for d in dists], [d.logprobs for d in dists],
                                         [d.top1 for d in dists], {**meta, "k": fid.top_k})

        def long_dists() -> fidelity_set.Baseline:
            if model_ is not None:
                n = longctx.probe_length(model_, lc.positions, params.memory.max_model_len)
                found = longctx.baseline(model_, long_texts.sequences(long_rows, lc.texts, encode, n), lc.top_k,
                                         lc.first_edge)
            else:
                # the text and the one token vLLM generates after it must fit its --max-model-len
                context = io.read_json(variant.serve_path / "config.json").get("max_position_embeddings")
                n = long_texts.probe_positions(lc.positions, context, params.memory.max_model_len,
                                               params.serving.vllm.max_model_len - 2)
                found = longctx.baseline_topk(session.token_dists, long_texts.sequences(long_rows, lc.texts, encode, n),
                                              lc.top_k, lc.first_edge, context, path)
            return fidelity_set.Baseline(found.seqs, found.ids, found.logprobs, found.top1, {**meta, **found.meta})

        model_ = getattr(session, "model", None)
        path, why_not = (None, None) if model_ is not None else \
            longctx.engine_path(backend.name, session.info.get("device"))
        short = long = NOT_SET
        if fid is not None:
            short = cache.kept("fidelity_base", [dataclasses.asdict(fid), seqs, meta], ".npz", short_dists,
                               fidelity_set.save, fidelity_set.load)
        if lc is not None and why_not is not None:
            long = fidelity_set.Baseline([], [], [], [], {"configured": True, "unavailable": why_not})
        elif lc is not None:
            long = cache.kept("long_base", [dataclasses.asdict(lc), params.memory.max_model_len, long_rows, meta],
                              ".npz", long_dists, fidelity_set.save, fidelity_set.load)
    return short, long


@runner.stage_main("fidelity_base", ("model",))
def main(st: runner.Stage) -> None:
    model, params = st.args[0], st.params
    if params.eval.fidelity is None and params.eval.long_context is None:
        fidelity_set.save(paths.fidelity_base(model), NOT_SET)
        fidelity_set.save(paths.long_base(model), NOT_SET)
        st.done("ok", "eval.fidelity and eval.long_context are not set")
        return
    try:
        short, long = baseline_dists(params, model)
    except io.DataError as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except Unsupported as e:    # the evaluate stages then say why they have no fidelity
        short = long = fidelity_set.Baseline([], [], [], [], {"configured": True, "unavailable": str(e)})
    fidelity_set.save(paths.fidelity_base(model), short)
    fidelity_set.save(paths.long_base(model), long)
    if short.meta.get("unavailable"):
        st.done("unsupported", short.meta["unavailable"])
        return
    said = [f"{len(b.seqs)} {what}, {sum(len(s) - 1 for s in b.seqs):,} positions"
            for b, what in ((short, "texts"), (long, "long texts")) if b.seqs]
    st.done("ok", "; ".join(said) + (f"; long texts: {long.meta['unavailable']}" if long.meta.get("unavailable") else ""))


if __name__ == "__main__":
    main()
