"""The repair's measurements, on the model in float32 teacher-forced on selection texts: each Linear's
sensitivity (a diagonal-Fisher score, as ModelOpt's auto_quantize ranks layers), and the fidelity
proxy of a candidate: its Linears' weights rounded to nearest (RTN) at the tier's bits and group size,
its mean next-token KL to the unrounded model. Used by quantize for a tier with `repair` (pipeline/quant/repair.py decides what
to promote; this only measures). RTN is cruder than GPTQ or AWQ, so the proxy overstates their error:
a bound met here is met with room by the checkpoint that is built.

    proxy = Proxy(model, tokenizer, texts, max_len)
    proxy.scores({name: setting, ...})                            # sensitivity per Linear
    proxy.kl({"model.layers.0.mlp.down_proj": (4, 64, True)})   # name -> (bits, group size | None, symmetric)

torch is imported inside the class: the stage imports this module only for a tier with `repair`.
"""
from __future__ import annotations

import re
import time
from typing import Iterable

from pipeline.quant import repair

Setting = tuple[int, "int | None", bool]        # bits, group size (None: per output channel), symmetric


def ignored(name: str, patterns: Iterable[str]) -> bool:
    """llm-compressor's ignore semantics for a module name: an exact name, its last part, or `re:<regex>`."""
    for p in patterns:
        if p.startswith("re:") and re.match(p[3:], name) or name == p or name.rpartition(".")[2] == p:
            return True
    return False


def rtn(weight, bits: int, group_size: int | None, symmetric: bool):
    """The weight rounded to `bits` per group of `group_size` inputs (per row when None), back in float."""
    import torch

    out_f, in_f = weight.shape
    g = group_size or in_f
    w = weight.float().reshape(out_f, in_f // g, g)
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        scale = (w.abs().amax(-1, keepdim=True) / qmax).clamp(min=1e-12)
        q = torch.clamp(torch.round(w / scale), -qmax - 1, qmax) * scale
    else:
        lo, hi = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
        scale = ((hi - lo) / (2 ** bits - 1)).clamp(min=1e-12)
        zero = torch.round(-lo / scale)
        q = (torch.clamp(torch.round(w / scale) + zero, 0, 2 ** bits - 1) - zero) * scale
    return q.reshape(out_f, in_f).to(weight.dtype)


class Proxy:
    def __init__(self, model, tokenizer, texts: list[str], max_len: int, ignore: Iterable[str] = ()):
        import torch

        self.model = model.eval()
        self.linears = {n: m for n, m in model.named_modules()
                        if isinstance(m, torch.nn.Linear) and not ignored(n, ignore)}
        self.original = {n: m.weight.detach().clone() for n, m in self.linears.items()}
        self.ids = [tokenizer(t, return_tensors="pt", truncation=True, max_length=max_len).input_ids
                    for t in texts]
        self.ids = [x for x in self.ids if x.shape[1] > 1]
        if not self.ids:
            raise ValueError("repair: no selection text has two tokens")
        self.positions = sum(x.shape[1] for x in self.ids)
        self.base = [self._logp(x) for x in self.ids]

    def sizes(self) -> dict[str, int]:
        return {n: w.numel() for n, w in self.original.items()}

    def _logp(self, ids):
        import torch

        with torch.no_grad():
            return torch.log_softmax(self.model(ids).logits[0].float(), -1)

    def scores(self, settings: dict[str, Setting]) -> dict[str, float]:
        """Each named Linear's sensitivity, ModelOpt auto_quantize's default ("gradient") score: the sum
        over positions and outputs of (dL/dY)^2 (dY)^2, L the selection texts' next-token NLL, Y the
        Linear's output and dY its change when its weight alone is rounded as given; per position. A
        diagonal Fisher estimate of the loss change: one forward and backward per text for every Linear
        (the KL of each rounded alone would take a forward per Linear)."""
        import torch

        delta = {n: self.original[n] - rtn(self.original[n], *s) for n, s in settings.items()}
        inputs: dict[str, object] = {}
        found = dict.fromkeys(settings, 0.0)

        def keep(name):
            return lambda mod, args, out: inputs.__setitem__(name, args[0].detach())

        def score(name):
            def hook(mod, grad_in, grad_out):
                dy = inputs[name] @ delta[name].T.to(inputs[name].dtype)
                found[name] += float(((grad_out[0].float() ** 2) * (dy.float() ** 2)).sum())
            return hook

        embed = self.model.get_input_embeddings().weight
        grads = {p: p.requires_grad for p in self.model.parameters()}
        hooks = [h for n in settings for h in (self.linears[n].register_forward_hook(keep(n)),
                                              self.linears[n].register_full_backward_hook(score(n)))]
        try:
            for p in grads:          # activation gradients only: the embeddings carry the graph
                p.requires_grad_(p is embed)
            for ids in self.ids:
                logits = self.model(ids).logits[0].float()
                torch.nn.functional.cross_entropy(logits[:-1], ids[0, 1:], reduction="sum").backward()
                inputs.clear()
        finally:
            for h in hooks:
                h.remove()
            for p, g in grads.items():
                p.requires_grad_(g)
                p.grad = None
        return {n: v / self.positions for n, v in found.items()}

    def kl(self, settings: dict[str, Setting]) -> float:
        """Mean KL (nats per token, every position of every text) of the model with the named Linears
        rounded as given, the others unrounded, to the unrounded model. The weights are restored after."""
        import torch

        try:
            for name, setting in settings.items():     # rounded afresh: one copy of the weights kept
                self.linears[name].weight.data = rtn(self.original[name], *setting)
            total = 0.0
            with torch.no_grad():
                for ids, base in zip(self.ids, self.base):
                    total += float((base.exp() * (base - self._logp(ids))).sum())
            return total / self.positions
        finally:
            for name in settings:
                self.linears[name].weight.data = self.original[name]


def plan(model, tokenizer, texts: list[str], tier, group_size: int | None) -> dict:
    """Measure each layer group's sensitivity, search the fewest groups to promote, and return the
    record quantize keeps (`promoted_modules`: what the recipe promotes)."""
    r, t0 = tier.repair, time.perf_counter()
    proxy = Proxy(model, tokenizer, texts, r.max_len, tier.ignore)
    gs = {g.name: g for g in repair.groups(proxy.linears)}
    sizes = {name: sum(proxy.original[m].numel() for m in g.modules) for name, g in gs.items()}
    low = (tier.weight_bits, group_size, tier.symmetric)
    high = None if r.promote_bits == 16 else (r.promote_bits, None, tier.symmetric)
    per_linear = proxy.scores({m: low for g in gs.values() for m in g.modules})
    sensitivity = {name: sum(per_linear[m] for m in g.modules) for name, g in gs.items()}
    order = repair.ranked(sensitivity, sizes)

    def settings(k: int) -> dict:
        promoted = set(order[:k])
        return {m: (high if name in promoted else low) for name in order for m in gs[name].modules
                if name not in promoted or high is not None}

    found = repair.search(len(order), lambda k: proxy.kl(settings(k)), r.max_kl, r.max_candidates)
    k = len(order) if found.chosen is None else found.chosen      # none meets it: the most repaired one
    promoted = order[:k]
    return {
        "groups": len(order), "promoted": promoted, "promote_bits": r.promote_bits,
        "promoted_modules": [m for name in promoted for m in gs[name].modules],
        "effective_bits": round(repair.effective_bits(sizes, promoted, tier.weight_bits, r.promote_bits), 3),
        "met_bound": found.chosen is not None, "stopped": found.stopped,
        "proxy": {"kind": "RTN, float32, teacher-forced on the calibration file's last rows",
                  "texts": len(proxy.ids), "positions": proxy.positions, "bound": r.max_kl,
                  "tried": {str(k_): round(v, 5) for k_, v in found.tried.items()}},
        # per group, most sensitive per parameter first: the diagonal-Fisher score (Proxy.scores)
        "sensitivity": {name: round(sensitivity[name], 8) for name in order},
        "seconds": round(time.perf_counter() - t0, 1),
    }
