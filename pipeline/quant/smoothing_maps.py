"""SmoothQuant's mappings, structurally (quant/smoothing.py's first check): the mappings llm-compressor
would use, resolved to layers as it resolves them, and each held against one traced forward pass (the
smooth layer's output is the balance layers' input, by value), corrected to the one norm that feeds
them or refused. Torch and llm-compressor are imported where used: the module loads without them.
"""
from __future__ import annotations

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
