"""A model's architecture against the reference backend's fast paths: what they meet, what they apply,
and what they hand back to the model's own forward, decided once at load (pipeline/engines/reference/backend.py)
and recorded in the session info (result.json `serving`).

The fast paths replace parts of the model's forward: the attention (kvcache.py: grouped_sdpa, the fp8
KV cache), the LM head at scored positions only (loglik.py), the float32 head of the distributions
(dists.py), and the decoding loop (generate.py, which calls the model's own forward). What they
handle exactly as the model's forward does: sliding-window layers (the mask carries the window), any
head_dim and query scale, query/key norms (inside the attention module), tied embeddings (the head
is the model's own output embedding), attention-logit soft-capping (kvcache._softcapped) and final
logit soft-capping (`logits`). Two checks on one short padded batch catch the rest:

- `attention_handback`: qtier's attention raises kvcache.UnhandledAttention on any feature an
  attention module passes that it does not implement (attention sinks, position biases, ...): the
  model is handed back to its own eager attention (with the fp8 KV cache: unsupported, since the
  rounding lives in qtier's attention);
- `head_handback`: decoder -> `logits` must give the model's own logits; a forward that does more
  after the head (Cohere's logit_scale, Granite's logits_scaling, ...) hands log-likelihoods back
  to HFLM and distributions back to the model's own forward.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pipeline import errors
from pipeline.engines.reference import kvcache
from pipeline.engines.base import Unsupported

_UNSET = object()


def _sliding(config) -> str | None:
    """The window and how many layers have it, as the model builds its masks."""
    window = getattr(config, "sliding_window", None)
    layers = config.num_hidden_layers
    types = getattr(config, "layer_types", None)
    n = sum(t == "sliding_attention" for t in types) if types else (layers if window else 0)
    return f"{window} tokens on {n} of {layers} layers" if window and n else None


def features(model) -> dict[str, Any]:
    """The architecture features the fast paths meet, for the record."""
    cfg = model.config
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    attn = [m for m in model.modules() if hasattr(m, "k_proj") and hasattr(m, "v_proj")]
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    return {"model_type": cfg.model_type, "head_dim": head_dim,
            "heads": f"{heads} query / {getattr(cfg, 'num_key_value_heads', None) or heads} KV",
            "sliding_window": _sliding(cfg),
            "qk_norm": any(hasattr(m, "q_norm") and hasattr(m, "k_norm") for m in attn),
            "tied_embeddings": head is not None and embed is not None and head.weight is embed.weight,
            "attn_logit_softcapping": getattr(cfg, "attn_logit_softcapping", None),
            "final_logit_softcapping": getattr(cfg, "final_logit_softcapping", None)}


def logits(model, hidden: torch.Tensor, float32: bool = False) -> torch.Tensor:
    """The model's logits from its decoder's last hidden states: the LM head, then the final soft-cap
    (Gemma 2: tanh(logits / cap) * cap) as the model's forward applies it. float32: the head in float32
    (a load-time quantized head without a float weight runs as it is, then upcast)."""
    head = model.get_output_embeddings()
    if float32 and head.weight.dtype.is_floating_point:
        out = F.linear(hidden.float(), head.weight.float(), None if head.bias is None else head.bias.float())
    else:
        out = head(hidden)
        out = out.float() if float32 else out
    cap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(out / cap) * cap if cap else out


def _probe(model) -> tuple[torch.Tensor, torch.Tensor]:
    """Two left-padded rows (7 and 4 tokens): the padding mask makes every attention take its masked path."""
    ids = (torch.arange(2 * 7).reshape(2, 7) * 7 + 1) % model.config.vocab_size
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, :3] = 0
    return ids.to(model.device), mask.to(model.device)


def attention_handback(model) -> str | None:
    """None when qtier's attention runs every layer of `model` (loaded with kvcache.register's
    attention), else why not: the UnhandledAttention one of its layers raised."""
    ids, mask = _probe(model)
    try:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask)
    except kvcache.UnhandledAttention as e:
        return str(e)
    return None


def head_handback(model) -> str | None:
    """None when decoder -> `logits` is the model's own forward, else why not. Computed once per model
    (kept on it: loglik and dists both ask)."""
    cached = getattr(model, "qtier_head_handback", _UNSET)
    if cached is not _UNSET:
        return cached
    reason = _head_reason(model)
    model.qtier_head_handback = reason
    return reason


def _head_reason(model) -> str | None:
    if getattr(model.config, "is_encoder_decoder", False):
        return "an encoder-decoder model"
    if not hasattr(model, "get_decoder") or model.get_output_embeddings() is None:
        return f"{type(model).__name__} has no separate decoder and LM head"
    ids, mask = _probe(model)
    with torch.inference_mode():
        own = model(input_ids=ids, attention_mask=mask).logits
        ours = logits(model, model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state)
    real = mask.bool()
    diff = float((own[real].float() - ours[real].float()).abs().max())
    scale = max(1.0, float(own[real].float().abs().max()))
    if diff > 1e-3 * scale:
        return (f"{type(model).__name__}'s forward changes the logits after its LM head "
                f"(max difference {diff:.3g} on a probe)")
    return None


def load(auto_class, path, kwargs: dict[str, Any], info: dict[str, Any], fp8: bool):
    """The model with qtier's attention on every layer, or, where that attention would compute something
    else than the model's own (the checks below), the model's own eager attention: recorded in
    info (`attention`, `architecture`, `loglikelihood`, `token_dists`). With the fp8 KV cache there is
    no hand-back (its rounding lives in qtier's attention): Unsupported."""
    why = None
    try:
        model = auto_class.from_pretrained(path, **kwargs).eval()
    except ValueError as e:    # transformers' own refusal: this architecture's attention is not sdpa's
        if "scaled_dot_product_attention" not in str(e):
            raise
        why = f"transformers: {errors.one_line(e).split('. ')[0]}"
        model = None
    if model is not None:
        why = attention_handback(model)
    if why is not None:
        if fp8:
            raise Unsupported(f"the fp8 KV cache is simulated in qtier's attention, which cannot run this "
                              f"model's: {why}")
        if model is None:
            model = auto_class.from_pretrained(path, **{**kwargs, "attn_implementation": "eager"}).eval()
        else:
            model.set_attn_implementation("eager")
        info["attention"] = f"the model's own eager attention: {why}"
    else:
        info["attention"] = "qtier's (pipeline/engines/reference/kvcache.py: grouped sdpa" + (
            ", fp8 K/V)" if fp8 else ")")
    info["architecture"] = features(model)
    head = head_handback(model)
    if model.device.type != "cpu":
        info["loglikelihood"] = "HFLM's own (qtier's log-likelihood path builds its batches on the CPU)"
    else:
        info["loglikelihood"] = "qtier's (pipeline/engines/reference/loglik.py)" if head is None else f"HFLM's own: {head}"
    info["token_dists"] = ("decoder + float32 head (pipeline/engines/reference/dists.py)" if head is None
                           else f"the model's own forward, its logits in {model.dtype}: {head}")
    return model
