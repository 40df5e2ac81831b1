"""Stage fidelity_base@<model>: the baseline's next-token distributions on the fidelity texts.

    python -m pipeline.stages.fidelity_base <model>

Serves the baseline (decision.baseline) with the configured backend, tokenizes eval.fidelity's texts
with its tokenizer (at most max_tokens each) and writes results/fidelity/<model>.npz: every text's token
ids and, at each position, the baseline's top-k next-token ids and log-probs (eval.fidelity.top_k), with
the backend and compute dtype that produced them. Each evaluate stage of the model scores the same ids:
on vLLM against these top-k, on the reference backend against the baseline itself, loaded beside the
variant (full vocabulary). Without eval.fidelity the file says so and evaluate reports no fidelity.
"""
from __future__ import annotations

import sys

from pipeline import io, paths, schema
from pipeline.backends import Unsupported
from pipeline.backends.selection import select
from pipeline.backends.base import baseline_variant
from pipeline.backends.selection import select
from pipeline.domain import fidelity_set
from pipeline.stages import runner


def baseline_dists(params: schema.Params, model: str) -> fidelity_set.Baseline:
    from transformers import AutoTokenizer  # lazy: transformers takes seconds to import

    fid = params.eval.fidelity
    base = params.decision.baseline
    variant = baseline_variant(params, model, paths.fidelity_logs(model))
    tokenizer = AutoTokenizer.from_pretrained(variant.serve_path)
    seqs = [ids for t in fidelity_set.texts(fid) if len(ids := tokenizer(t).input_ids[: fid.max_tokens]) > 1]
    backend = select(params)
    k = fid.top_k
    with backend.session(variant) as session:
        dists = session.token_dists(seqs, k)
        meta = {"model": model, "tier": base.tier, "kv": base.kv, "backend": backend.name, "k": k,
                "compute_dtype": session.info.get("compute_dtype"), "full_logits": session.full_logits}
    return fidelity_set.Baseline(seqs, [d.ids for d in dists], [d.logprobs for d in dists],
                                 [d.top1 for d in dists], meta)


@runner.stage_main("fidelity_base", ("model",))
def main(st: runner.Stage) -> None:
    model, params = st.args[0], st.params
    out = paths.fidelity_base(model)
    if params.eval.fidelity is None:
        fidelity_set.save(out, fidelity_set.Baseline([], [], [], [], {"configured": False}))
        st.done("ok", "eval.fidelity is not set")
        return
    try:
        base = baseline_dists(params, model)
    except io.DataError as e:
        print(f"qtier: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except Unsupported as e:    # the evaluate stages then say why they have no fidelity
        base = fidelity_set.Baseline([], [], [], [], {"configured": True, "unavailable": str(e)})
    fidelity_set.save(out, base)
    if base.meta.get("unavailable"):
        st.done("unsupported", base.meta["unavailable"])
    else:
        st.done("ok", f"{len(base.seqs)} texts, {sum(len(s) - 1 for s in base.seqs)} positions, "
                      f"top-{base.meta.get('k')}")


if __name__ == "__main__":
    main()
