"""SmoothQuant's mappings checked on the model before any rounding (issue 55): a smoothing divides a
smooth layer's output channels by scales and multiplies the balance layers' input columns by them,
which leaves the model's function unchanged only if that output is exactly those layers' input, and
only if dividing the smooth layer's weight divides its output.

    recipe, used = smoothing.checked(model, recipe, input_ids, "tiers.int8")   # oneshot.quantize

llm-compressor (0.14) takes a recipe's SmoothQuantModifier.mappings, else its per-architecture
registry (modifiers/transform/smoothquant/utils.py MAPPINGS_REGISTRY, Llama-style by default), and
resolves each mapping's regexes per decoder layer (SmoothQuantModifier._resolve_mappings, used here so
the layers checked are the layers it will smooth). Nothing checks the result: on a "sandwich-norm"
model (Gemma 2/3: a norm on the attention output, `post_attention_layernorm`, and another before the
MLP, `pre_feedforward_layernorm`) the registry's `post_attention_layernorm -> gate/up` divides the
attention branch and multiplies gate/up weights whose input was never divided.

`checked` traces one forward pass with hooks and, per resolved mapping, holds the smooth layer's
output against each balance layer's input (by value, not by name). A mapping that fails is corrected
when exactly one norm-like module (a 1-D weight) outputs the balance layers' input, under the same
name in every layer; else it is refused (SmoothingError, one line naming the layer and the mapping to
set). Each smooth layer is then folded once on its traced input (weight / scales, as llm-compressor
does): a layer whose output is not divided by them (Gemma's RMSNorm multiplies by 1 + weight) is
refused as well. The mappings used are written into the recipe, so results/quantize records them.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

SMOOTHQUANT = "SmoothQuantModifier"


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


def modifier(recipe: dict) -> dict | None:
    """The recipe's SmoothQuantModifier (its arguments), None without one."""
    for stage in recipe.values():
        for modifiers in (stage.values() if isinstance(stage, dict) else ()):
            if isinstance(modifiers, dict) and isinstance(modifiers.get(SMOOTHQUANT), dict):
                return modifiers[SMOOTHQUANT]
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


def checked(model, recipe: dict, input_ids, key: str) -> tuple[dict, list[list]]:
    """The recipe with SmoothQuantModifier.mappings set to the checked (or corrected) mappings, and
    those mappings; the recipe unchanged and [] without SmoothQuant. SmoothingError on a mapping that
    cannot be made exact or a smooth layer that does not fold."""
    recipe = copy.deepcopy(recipe)
    mod = modifier(recipe)
    if mod is None:
        return recipe, []
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
                    f"weight does not divide its output (a norm scaled by 1 + weight?); drop {SMOOTHQUANT} from "
                    f"the recipe or set its mappings to layers that fold")
    mod["mappings"] = [m.as_recipe() for m in used]
    return recipe, mod["mappings"]
