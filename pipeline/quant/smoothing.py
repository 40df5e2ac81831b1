"""SmoothQuant's and AWQ's rescalings checked on the model before any rounding (issue 55): a smoothing
divides a smooth layer's output channels by scales and multiplies the balance layers' input columns by
them, which leaves the model's function unchanged only if that output reaches those layers' input
unchanged (or channel-wise), and only if dividing the smooth layer's weight divides its output.

    done = smoothing.checked(model, recipe, input_ids, "tiers.int8")      # oneshot.quantize
    done.recipe, done.mappings, done.kl                                   # run, recorded

llm-compressor (0.14) takes a recipe's SmoothQuantModifier.mappings, else its per-architecture
registry (modifiers/transform/smoothquant/utils.py MAPPINGS_REGISTRY, Llama-style by default), and
resolves each mapping's regexes per decoder layer (SmoothQuantModifier._resolve_mappings, used here so
the layers checked are the layers it will smooth). Nothing checks the result: on a "sandwich-norm"
model (Gemma 2/3: a norm on the attention output, `post_attention_layernorm`, and another before the
MLP, `pre_feedforward_layernorm`) the registry's `post_attention_layernorm -> gate/up` divides the
attention branch and multiplies gate/up weights whose input was never divided.

Structurally, `checked` traces one forward pass with hooks and, per resolved mapping, holds the smooth
layer's output against each balance layer's input (by value, not by name). A mapping that fails is
corrected when exactly one norm-like module (a 1-D weight) outputs the balance layers' input, under the
same name in every layer; else it is refused (SmoothingError, one line naming the layer and the mapping
to set). Each smooth layer is folded once on its traced input (weight / scales): one whose output is
not divided by them is refused. Numerically, each mapping's smoothing is applied alone as llm-compressor
applies it (`smooth`) and the logits' KL before rounding held to KL_ROUNDING; AWQ's mappings
(AWQModifier's registry, modifiers/transform/awq/mappings.py) get the KL check alone (`check_awq`).
The mappings used are written into the recipe, so results/quantize records them with their KLs.

Gemma-style norms compute `normalized * (1 + weight)`, where dividing the weight does not divide the
output; llm-compressor's oneshot converts them to `normalized * weight` for the whole run and back
after (llmcompressor/modeling/offset_norm.py: norm_calibration_context; the fold is then
w' = (1 + w) / s - 1), so every check here runs inside that same context: it sees the model as
oneshot's modifiers do. An offset norm that context does not know is refused by the fold check.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

SMOOTHQUANT = "SmoothQuantModifier"
AWQ = "AWQModifier"


class SmoothingError(ValueError):
    """A smoothing that would change the model's function before any rounding."""


@dataclass(frozen=True)
class Mapping:
    """One llm-compressor SmoothQuant mapping: balance-layer patterns and the smooth-layer pattern."""
    balance: tuple[str, ...]
    smooth: str

    def as_recipe(self) -> list:
        return [list(self.balance), self.smooth]

    def shown(self) -> str:
        return f"[{', '.join(self.balance)}] <- {self.smooth}"


def modifier(recipe: dict, name: str = SMOOTHQUANT) -> dict | None:
    """The recipe's modifier `name` (its arguments), None without one."""
    for stage in recipe.values():
        for modifiers in (stage.values() if isinstance(stage, dict) else ()):
            if isinstance(modifiers, dict) and isinstance(modifiers.get(name), dict):
                return modifiers[name]
    return None


def default_mappings(model) -> list[Mapping]:
    """What llm-compressor would use for this model without mappings in the recipe."""
    from llmcompressor.modifiers.transform.smoothquant.dynamic_mappings import get_layer_mappings_from_model

    return [Mapping(tuple(m[0]), m[1]) for m in get_layer_mappings_from_model(model)]


def resolve(model, mapping: Mapping) -> list[tuple[str, list[str]]]:
    """(smooth layer name, balance layer names) per match, as llm-compressor resolves them."""
    from llmcompressor.modifiers.transform.smoothquant import SmoothQuantModifier

    mod = SmoothQuantModifier(mappings=[mapping.as_recipe()])
    names = {m: n for n, m in model.named_modules()}
    return [(r.smooth_name, [names[b] for b in r.balance_layers]) for r in mod._resolve_mappings(model)]


def trace(model, input_ids) -> tuple[dict, dict]:
    """(name -> (input, output)) of every module with a tensor output, (name -> first input) of every
    module, from one forward pass."""
    import torch

    io, first_in, hooks = {}, {}, []
    for name, module in model.named_modules():
        def hook(mod, args, out, name=name):
            if args and torch.is_tensor(args[0]):
                first_in.setdefault(name, args[0].detach())
            if torch.is_tensor(out) and name not in io:
                io[name] = (args[0].detach() if args and torch.is_tensor(args[0]) else None, out.detach())
        hooks.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(input_ids=input_ids)
    finally:
        for h in hooks:
            h.remove()
    return io, first_in


def _same(a, b) -> bool:
    import torch

    return a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)


def feeders(model, io: dict, tensor) -> list[str]:
    """Norm-like modules (a 1-D weight) whose output is `tensor`."""
    modules = dict(model.named_modules())
    return [n for n, (_, out) in io.items()
            if getattr(getattr(modules[n], "weight", None), "ndim", 0) == 1 and _same(out, tensor)]


def folds(module, x, out) -> bool:
    """Whether dividing the layer's weight (and bias) by scales divides its output by them, on `x`."""
    import torch

    w = module.weight
    s = torch.linspace(1.5, 3.0, out.shape[-1], dtype=w.dtype, device=w.device)
    saved = [(p, p.detach().clone()) for p in (w, getattr(module, "bias", None)) if p is not None]
    with torch.no_grad():
        try:
            w.div_(s if w.ndim == 1 else s.view(-1, 1))
            if getattr(module, "bias", None) is not None:
                module.bias.div_(s)
            folded = module(x)
        finally:
            for p, v in saved:
                p.copy_(v)
    return torch.allclose(folded, out / s, rtol=1e-4, atol=1e-6 * float(out.abs().max()))


def check_mapping(model, io, first_in, mapping: Mapping, key: str) -> Mapping:
    """The mapping if every match is exact, else the corrected one (module docstring)."""
    matches = resolve(model, mapping)
    wrong = [(s, b) for s, bal in matches for b in bal if not _same(io.get(s, (None, None))[1], first_in.get(b))]
    if not wrong:
        return mapping
    found = {tuple(feeders(model, io, first_in.get(b))) for _, bal in matches for b in bal}
    suffixes = {f[0].rsplit(".", 1)[-1] for f in found if len(f) == 1}
    smooth, balance = wrong[0]
    if len(suffixes) != 1 or any(len(f) != 1 for f in found):
        raise SmoothingError(f"{key}: SmoothQuant mapping {mapping.shown()}: {smooth}'s output is not the input of "
                             f"{balance} and no single norm feeds it; set SmoothQuantModifier.mappings in the recipe "
                             f"to the norm whose output {balance} reads")
    fixed = Mapping(mapping.balance, f"re:.*{suffixes.pop()}$")
    if [b for _, b in resolve(model, fixed)] != [b for _, b in matches] or \
            any(not _same(io[s][1], first_in.get(b)) for s, bal in resolve(model, fixed) for b in bal):
        raise SmoothingError(f"{key}: SmoothQuant mapping {mapping.shown()}: {smooth}'s output is not the input of "
                             f"{balance}, and {fixed.smooth} does not match the same layers; set "
                             f"SmoothQuantModifier.mappings in the recipe")
    return fixed


@dataclass(frozen=True)
class Checked:
    """What quantize runs and records: the recipe with SmoothQuantModifier.mappings set, those mappings
    ([] without SmoothQuant), and each checked mapping's KL before rounding (SmoothQuant's and AWQ's;
    none in half precision)."""
    recipe: dict
    mappings: list[list]
    kl: dict[str, float]


def checked(model, recipe: dict, input_ids, key: str) -> Checked:
    """The recipe's rescalings checked (module docstring; AWQ's by KL alone: check_awq). SmoothingError
    on a mapping that cannot be made exact, a smooth layer that does not fold, or a KL above
    KL_ROUNDING. The model is left bit-identical: the norm context's 1 + weight round trip moves
    float32 norm weights by up to 6e-8, so the 1-D weights are put back as they were."""
    import torch
    from llmcompressor.modeling.offset_norm import norm_calibration_context

    norms = [(p, p.detach().clone()) for p in model.parameters() if p.ndim == 1]
    try:
        with norm_calibration_context(model):       # as oneshot runs the modifiers (module docstring)
            return _checked(model, copy.deepcopy(recipe), input_ids, key)
    finally:
        with torch.no_grad():
            for p, v in norms:
                p.copy_(v)


def _checked(model, recipe: dict, input_ids, key: str) -> Checked:
    kls = {f"AWQ {m}": v for m, v in check_awq(model, recipe, input_ids, key).items()}
    mod = modifier(recipe)
    if mod is None:
        return Checked(recipe, [], kls)
    given = mod.get("mappings")
    mappings = [Mapping(tuple(m[0]), m[1]) for m in given] if given else default_mappings(model)
    io, first_in = trace(model, input_ids)
    used = [check_mapping(model, io, first_in, m, key) for m in mappings]
    modules = dict(model.named_modules())
    for m in used:
        for smooth, _ in resolve(model, m):
            x, out = io[smooth]
            if not folds(modules[smooth], x, out):
                raise SmoothingError(
                    f"{key}: SmoothQuant cannot fold into {smooth} ({type(modules[smooth]).__name__}): dividing its "
                    f"weight does not divide its output (a norm scaled by 1 + weight that llm-compressor does not "
                    f"convert?); drop {SMOOTHQUANT} from the recipe or set its mappings to layers that fold")
    strength = mod.get("smoothing_strength", 0.5)                    # SmoothQuantModifier's default
    kls.update({f"SmoothQuant {m}": v for m, v in check_numerically(model, used, input_ids, strength, key).items()})
    mod["mappings"] = [m.as_recipe() for m in used]
    return Checked(recipe, mod["mappings"], kls)


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
