"""A failing quantized tier repaired by mixed precision: which Linears move together, which to promote
first, how many, and the recipe that builds the result (docs/tiers-and-recipes.md "Repaired tiers").

    groups(names)                 the layer groups: projections vLLM fuses into one kernel are one group
    ranked(sensitivity, sizes)    promotion order: the most KL removed per promoted parameter first
    search(n, kl_at, bound, max)  the fewest groups whose promotion brings the proxy KL within the bound
    promoted_recipe(recipe, ...)  the tier's rendered recipe with those modules at the promoted precision

Pure functions: no model, no llm-compressor. The KL itself is measured by pipeline/quant/sensitivity.py.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Iterable

from pipeline.quant.recipes import quant_modifiers

# Projections vLLM loads as one fused Linear (its packed_modules_mapping for Llama-style models:
# qkv_proj, gate_up_proj). A fused layer takes one quantization scheme, so its parts are never split.
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


@dataclass(frozen=True)
class Group:
    name: str                     # parent module + its projections, e.g. model.layers.3.self_attn.q_proj+k_proj+v_proj
    modules: tuple[str, ...]      # full module names, in model order


def groups(linear_names: Iterable[str]) -> list[Group]:
    """The Linears (in model order) as promotion groups: each fused set under one parent is one group,
    any other Linear a group of its own. Groups keep the order of their first module."""
    members: dict[tuple[str, str], list[str]] = {}
    for name in linear_names:
        parent, _, leaf = name.rpartition(".")
        fused = next((s for s in FUSED if leaf in s), None)
        key = (parent, "+".join(fused) if fused else leaf)
        members.setdefault(key, []).append(name)
    return [Group(f"{parent}.{'+'.join(n.rpartition('.')[2] for n in names)}" if parent
                  else "+".join(names), tuple(names))
            for (parent, _), names in members.items()]


def ranked(sensitivity: dict[str, float], sizes: dict[str, int]) -> list[str]:
    """Group names, the one whose quantization alone costs the most KL per parameter first (promoting it
    buys the most fidelity per byte); ties by name, so the order is a function of the measurements."""
    return sorted(sensitivity, key=lambda g: (-sensitivity[g] / max(sizes[g], 1), g))


@dataclass
class Search:
    bound: float
    tried: dict[int, float] = field(default_factory=dict)    # groups promoted -> proxy KL, in the order tried
    chosen: int | None = None     # the fewest groups promoted known to meet the bound; None: none does
    stopped: str = ""             # why the search ended, in words


def search(n: int, kl_at: Callable[[int], float], bound: float, max_candidates: int) -> Search:
    """Bisection on k, the number of top-ranked groups promoted, for the smallest k with kl_at(k) <= bound,
    reading at most `max_candidates` values of kl_at. It assumes the KL falls as groups are promoted
    (each promotion removes a quantizer); where it does not, the k it returns still meets the bound,
    as measured, but a smaller one may too. Deterministic: kl_at is the only input."""
    if max_candidates < 2:
        raise ValueError("repair.max_candidates: at least 2 (the uniform tier and every group promoted)")
    s = Search(bound)

    def meets(k: int) -> bool:
        s.tried[k] = float(kl_at(k))
        return s.tried[k] <= bound

    if meets(0):
        s.chosen, s.stopped = 0, f"the uniform tier already meets the bound (KL {s.tried[0]:.4f} <= {bound})"
        return s
    if not meets(n):
        s.stopped = (f"even all {n} groups promoted miss the bound (KL {s.tried[n]:.4f} > {bound}): "
                     "the promoted precision itself is too coarse")
        return s
    lo, hi = 0, n
    while hi - lo > 1 and len(s.tried) < max_candidates:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    s.chosen = hi
    s.stopped = (f"bisection converged: {hi} groups meet the bound, {lo} do not" if hi - lo <= 1 else
                 f"the candidate budget ({max_candidates}) ran out between {lo} and {hi} groups: "
                 f"{hi}, the fewest measured within the bound")
    return s


def effective_bits(sizes: dict[str, int], promoted: Iterable[str], bits: int, promote_bits: int) -> float:
    """Weight bits per quantized parameter (scales and zero points aside)."""
    promoted = set(promoted)
    total = sum(sizes.values())
    return sum(sizes[g] * (promote_bits if g in promoted else bits) for g in sizes) / total if total else 0.0


def promoted_recipe(recipe: dict, modules: list[str], promote_bits: int) -> dict:
    """The rendered recipe with `modules` promoted: at 16 bits added to every modifier's ignore list; at
    8 bits a config group of their exact names, per output channel (an exact name outranks the `Linear`
    target in compressed-tensors' matching, so they leave the 4-bit group). Returns a new dict."""
    out = copy.deepcopy(recipe)
    for mod in quant_modifiers(out):
        if promote_bits == 16:
            mod["ignore"] = list(mod.get("ignore") or []) + list(modules)
            continue
        groups_ = mod.get("config_groups")
        if not groups_:
            continue
        weights = copy.deepcopy(next(iter(groups_.values())).get("weights") or {})
        weights.update(num_bits=promote_bits, strategy="channel")
        weights.pop("group_size", None)
        groups_["promoted"] = {"targets": list(modules), "weights": weights}
    return out


def uniform_of(tiers: dict) -> dict[str, str | None]:
    """Each repaired tier -> the tier quantized the same way without repair (same method, recipe, bits,
    group size and symmetry), the one it is read beside; None when params has no such tier."""
    def how(t) -> tuple:
        return t.method, t.recipe, t.weight_bits, t.group_size, t.symmetric

    return {name: next((u for u, o in tiers.items() if o.repair is None and how(o) == how(t)), None)
            for name, t in tiers.items() if t.repair is not None}
