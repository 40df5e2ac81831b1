"""A failing KV mode repaired by keeping layers in the model's dtype (vLLM's --kv-cache-dtype-skip-layers):
which layers first, how many, and the record stage kvrepair keeps (docs/kv-cache.md "Repaired KV modes").

    order = ranked({0: 0.0004, 1: 0.012, ...})   # layer indices, the costliest alone first
    found = choose(order, kl_at, bound, max)    # the fewest top-ranked layers kept that meet the bound

Pure functions: no model. The KL itself is measured by pipeline/evaluation/kv_sensitivity.py; the
search is the weight repair's bisection (pipeline/quant/repair.py `search`), k being layers kept.
"""
from __future__ import annotations

from typing import Callable

from pipeline.quant import repair


def ranked(per_layer_kl: dict[int, float]) -> list[int]:
    """Layer indices, the one whose rounding alone costs the most KL first (every layer's K/V costs the
    same bytes, so KL per byte orders as KL); ties by index, so the order is a function of the
    measurements."""
    return sorted(per_layer_kl, key=lambda i: (-per_layer_kl[i], i))


def choose(order: list[int], kl_at: Callable[[list[int]], float], bound: float,
           max_candidates: int) -> repair.Search:
    """The fewest of `order`'s first layers whose keeping brings the measured KL within `bound`:
    kl_at(kept layers) -> KL. Keeping every layer serves the model's own cache (KL 0 up to arithmetic),
    so a bound above that is always met; `chosen` is how many of `order` are kept."""
    return repair.search(len(order), lambda k: kl_at(sorted(order[:k])), bound, max_candidates)


def summary(order: list[int], per_layer_kl: dict[int, float], found: repair.Search) -> dict:
    """What the stage records of the search (besides what it measured the KL on)."""
    k = len(order) if found.chosen is None else found.chosen
    return {"skip_layers": sorted(order[:k]), "kept": k, "layers": len(order),
            "met_bound": found.chosen is not None, "stopped": worded(found.stopped), "bound": found.bound,
            "tried": {str(n): round(v, 6) for n, v in found.tried.items()},
            # most costly first: each layer's KL with this format's rounding on its K/V alone
            "ranking": [[i, round(per_layer_kl[i], 6)] for i in order]}


def worded(stopped: str) -> str:
    """The weight search's reason in this search's terms (its k counts layers kept, not groups promoted)."""
    for a, b in (("the uniform tier", "the format on every layer"), ("groups promoted", "layers kept"),
                 ("groups", "layers kept"), ("the promoted precision itself is too coarse",
                                            "the model's own cache differs from itself (arithmetic)")):
        stopped = stopped.replace(a, b)
    return stopped
