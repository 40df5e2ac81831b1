"""SmoothQuant's and AWQ's rescalings, numerically (quant/smoothing.py's second check): each mapping's
smoothing applied alone as llm-compressor applies it, and the logits' KL before any rounding held to
KL_ROUNDING; AWQ's mappings by the same KL with fixed scales.
"""
from __future__ import annotations

import copy

from pipeline.quant.smoothing_maps import AWQ, Mapping, SmoothingError, modifier, resolve, trace

# Numerical check: the smoothed model's logits against the original's on the probe, before rounding,
# in float32 (the CPU path and the tests). Measured (64 tokens, strength 0.8): a function-preserving
# smoothing moves the logits by 1.6e-11 nats per token on the default model (SmolLM2-135M, its default
# mappings) and < 1e-14 on the tiny models of tests/test_smoothing.py; a wrong mapping by 6.9e-3 and 1.1e-2
# there (Gemma 2 and 3 with the registry's MLP mapping). In bfloat16 the smoothing's own rounding of each rescaled weight is 3.9e-3 on the default
# model, the size of a wrong mapping on a tiny one, so a half-precision model is not checked this way
# (the structural check and the fold check still run).
KL_ROUNDING = 1e-6


def measurable(model) -> bool:
    """Whether the model computes in float32 or wider, where KL_ROUNDING separates rounding from error."""
    import torch

    return next(model.parameters()).dtype in (torch.float32, torch.float64)


def kl(before, after) -> float:
    """Mean per-token KL(before || after) in nats, of two logits tensors, in float64."""
    import torch

    p, q = torch.log_softmax(before.double(), -1), torch.log_softmax(after.double(), -1)
    return float((p.exp() * (p - q)).sum(-1).mean())


def logits(model, input_ids):
    import torch

    with torch.no_grad():
        return model(input_ids=input_ids).logits


def kl_before_rounding(model, smoothed, input_ids) -> float:
    """KL of `smoothed`'s next-token distributions from `model`'s on `input_ids` (one pass each)."""
    return kl(logits(model, input_ids), logits(smoothed, input_ids))


def smooth(model, mappings: list[Mapping], input_ids, strength: float) -> None:
    """SmoothQuant applied in place as llm-compressor 0.14 applies it (SmoothQuantModifier: its mapping
    resolution, scale formula and `_apply_smoothing`), calibrated on one traced forward of `input_ids`
    (each smooth layer's per-channel output range, as its calibration hooks record it), inside oneshot's
    norm_calibration_context (Gemma-style norms folded as (1 + w) / s - 1)."""
    from llmcompressor.modeling.offset_norm import norm_calibration_context

    with norm_calibration_context(model):
        _smooth(model, mappings, input_ids, strength)


def _smooth(model, mappings: list[Mapping], input_ids, strength: float) -> None:
    from llmcompressor.modifiers.transform.smoothquant import SmoothQuantModifier
    from llmcompressor.modifiers.transform.smoothquant.base import SmoothQuantScale

    mod = SmoothQuantModifier(smoothing_strength=strength, mappings=[m.as_recipe() for m in mappings])
    mod.ignore = []
    mod.resolved_mappings_ = mod._resolve_mappings(model)
    io, _ = trace(model, input_ids)
    mod.scales_ = {}
    for r in mod.resolved_mappings_:
        out = io[r.smooth_name][1].reshape(-1, io[r.smooth_name][1].shape[-1])
        mod.scales_[r.smooth_name] = SmoothQuantScale(out.min(dim=0)[0], out.max(dim=0)[0])
    mod._apply_smoothing(model)


def smoothed(model, mappings: list[Mapping], input_ids, strength: float):
    """A copy of the model with `smooth` applied; the model itself unchanged."""
    other = copy.deepcopy(model)
    smooth(other, mappings, input_ids, strength)
    return other


def kl_in_place(model, layers: set[str], change, input_ids, before=None) -> float:
    """KL of the model after `change(model)` from before it, on `input_ids`; the parameters of `layers`
    (the ones `change` may touch) are restored after, so only they are copied, not the model."""
    import torch

    before = logits(model, input_ids) if before is None else before
    params = [p for n, mod in model.named_modules() if n in layers for p in mod.parameters(recurse=False)]
    saved = [p.detach().clone() for p in params]
    try:
        change(model)
        return kl(before, logits(model, input_ids))
    finally:
        with torch.no_grad():
            for p, v in zip(params, saved):
                p.copy_(v)


def check_numerically(model, mappings: list[Mapping], input_ids, strength: float, key: str) -> dict:
    """Each mapping's SmoothQuant applied alone, its KL before rounding against KL_ROUNDING: the KLs by
    mapping ({} for a half-precision model), or SmoothingError naming the first mapping above it."""
    if not measurable(model):
        return {}
    before, found = logits(model, input_ids), {}
    for m in mappings:
        layers = {n for s, bal in resolve(model, m) for n in (s, *bal)}
        found[m.shown()] = kl_in_place(model, layers, lambda x, m=m: smooth(x, [m], input_ids, strength),
                                       input_ids, before)
        if found[m.shown()] > KL_ROUNDING:
            raise SmoothingError(f"{key}: SmoothQuant mapping {m.shown()} changes the model before rounding "
                                 f"(KL {found[m.shown()]:.2e} > {KL_ROUNDING:.0e} on the probe); set "
                                 f"SmoothQuantModifier.mappings in the recipe")
    return found


# AWQ's rescalings: the same equivalence, searched per layer by AWQModifier rather than computed from
# ranges, so it is checked with fixed scales (any positive scales leave an equivalence unchanged).
# AWQ's mappings include Linear smooth layers (v_proj -> o_proj, up_proj -> down_proj) whose output
# reaches the balance layer through attention or the gate's product: channel-wise, so the fold holds
# though the tensors differ; value equality (check_mapping) does not apply, the KL does.


def awq_mappings(model, recipe: dict) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """(mapping shown, [(smooth layer, balance layers)] as AWQModifier resolves them: llm-compressor's
    registry or the recipe's mappings, matched per layer, shape-incompatible v_proj -> o_proj dropped)."""
    from compressed_tensors.utils import match_modules_set
    from llmcompressor.modifiers.transform.awq.base import _check_layers_are_compatible
    from llmcompressor.modifiers.transform.awq.dynamic_mappings import get_layer_mappings_from_model
    from llmcompressor.modifiers.transform.awq.mappings import AWQMapping
    from torch.utils._pytree import tree_leaves

    given = (modifier(recipe, AWQ) or {}).get("mappings")
    maps = [AWQMapping(**m) if isinstance(m, dict) else m for m in given] if given else get_layer_mappings_from_model(model)
    names = {m: n for n, m in model.named_modules()}
    out = []
    for m in maps:
        found = []
        for smooth, *balance in match_modules_set(model, (m.smooth_layer, *m.balance_layers)):
            bal = tree_leaves(balance)
            s, b = names[smooth[0]], [names[x] for x in bal]
            if _check_layers_are_compatible(smooth[0], s, bal, b):
                found.append((s, b))
        out.append((f"[{', '.join(m.balance_layers)}] <- {m.smooth_layer}", found))
    return out


def rescale(model, pairs: list[tuple[str, list[str]]]) -> None:
    """AWQModifier's fold (`_apply_smoothing`) with fixed scales in [1/e, e], in place."""
    import torch

    modules = dict(model.named_modules())
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for smooth, balance in pairs:
            n = modules[balance[0]].weight.shape[1]
            s = torch.exp(torch.rand(n, generator=gen) * 2 - 1).to(modules[balance[0]].weight)
            for b in balance:
                modules[b].weight.mul_(s.view(1, -1))
            w = modules[smooth].weight
            w.div_(s) if w.ndim == 1 else w[-n:].div_(s.view(-1, 1))
            if getattr(modules[smooth], "bias", None) is not None:
                modules[smooth].bias[-n:].div_(s)


def check_awq(model, recipe: dict, input_ids, key: str) -> dict:
    """Each AWQ mapping's fold applied alone (all its layers), its KL before rounding against
    KL_ROUNDING: the KLs by mapping that matched any layer ({} without AWQModifier or in half
    precision), or SmoothingError naming the mapping."""
    if modifier(recipe, AWQ) is None or not measurable(model):
        return {}
    before, found = logits(model, input_ids), {}
    for shown, pairs in awq_mappings(model, recipe):
        if not pairs:                       # no layer matched (GQA's v_proj -> o_proj): AWQ skips it too
            continue
        layers = {n for s, bal in pairs for n in (s, *bal)}
        found[shown] = kl_in_place(model, layers, lambda x, p=pairs: rescale(x, p), input_ids, before)
        if found[shown] > KL_ROUNDING:
            raise SmoothingError(f"{key}: AWQ mapping {shown} changes the model before rounding (KL "
                                 f"{found[shown]:.2e} > {KL_ROUNDING:.0e} on the probe); set AWQModifier.mappings "
                                 f"in the recipe")
    return found
