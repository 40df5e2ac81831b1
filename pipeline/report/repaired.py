"""Repaired tiers (mixed precision, tiers.<name>.repair) beside the uniform tier they repair: what the
search promoted, the effective bits and weights it cost, and the verdict each got. Pure."""
from __future__ import annotations

import re

from pipeline.domain.hardware.memory import mib
from pipeline.report.cells import md_row, status_cell
from pipeline.report.document import ModelReport

_GROUP = re.compile(r"(?:.*\.)?layers\.(\d+)\.(?:self_attn|mlp)\.(.+)$")
_SHORT = {"q_proj+k_proj+v_proj": "qkv", "gate_proj+up_proj": "gate_up", "o_proj": "o", "down_proj": "down"}


def short(group: str) -> str:
    """model.layers.3.self_attn.q_proj+k_proj+v_proj -> 3.qkv; a name of another shape as it is."""
    found = _GROUP.match(group)
    return f"{found.group(1)}.{_SHORT.get(found.group(2), found.group(2))}" if found else group


def repaired_lines(m: ModelReport) -> list[str]:
    if not m.repaired:
        return []
    lines = ["### Repaired tiers (mixed precision)", "",
             "Each layer group (the projections vLLM fuses, q/k/v and gate/up, move together) scored by how "
             "much rounding it at the tier's precision would cost (a diagonal-Fisher estimate, as ModelOpt's "
             "auto_quantize ranks layers) on the calibration file's last rows, not the task documents; the "
             "groups costing the most per parameter promoted first, their number bisected until the proxy "
             "(every other group rounded to nearest, its KL to the baseline) meets the tier's `repair.max_kl`. "
             "The checkpoint is then built by the tier's own method and judged like any tier, on the tasks.",
             "", md_row(["Variant", "Verdict", "Promoted groups", "Effective bits", "Weights (MiB)",
                         "Proxy KL: uniform -> built (bound)", "Search"]), "|" + "---|" * 7]
    notes = []
    for tier, uniform in m.repaired.items():
        for r in (x for x in m.rows if x.facts.tier in (uniform, tier)):
            f, rep = r.facts, r.facts.repair
            weights = f"{mib(f.weight_bytes):.1f}" if f.weight_bytes else "–"
            if f.tier == uniform or rep is None:
                bits = "uniform" if f.tier == uniform else "–"
                lines.append(md_row([r.variant, status_cell(r), "none (uniform)" if f.tier == uniform else "–",
                                     bits, weights, "–", "–"]))
                continue
            tried = rep.proxy.tried
            lines.append(md_row([r.variant, status_cell(r), f"{len(rep.promoted)} of {rep.groups} at "
                                 f"{rep.promote_bits} bits", f"{rep.effective_bits:.2f}", weights,
                                 f"{tried['0']:.4f} -> {tried[str(len(rep.promoted))]:.4f} "
                                 f"({rep.proxy.bound})", f"{len(tried)} candidates; {rep.stopped}"]))
            note = (f"`{tier}` promotes: {', '.join(short(g) for g in rep.promoted) or 'nothing'} "
                    f"(layer.group; {rep.proxy.texts} selection texts, {rep.proxy.positions:,} "
                    f"tokens; search {rep.seconds:.0f} s).")
            if note not in notes:
                notes.append(note)
        if uniform is None:
            notes.append(f"`{tier}`: params.yaml has no tier quantized the same way without repair to read it beside.")
    return lines + [""] + notes + [""]
