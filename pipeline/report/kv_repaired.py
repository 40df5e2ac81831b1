"""Repaired KV modes (kv_modes.<name>.repair): the layers stage kvrepair kept in the model's dtype, the
per-layer KL they were ranked by, the bytes per token they cost, and the verdict the repaired mode got
beside the same format on every layer. Pure."""
from __future__ import annotations

from pipeline.report.cells import md_row, status_cell
from pipeline.report.document import ModelReport

TOP = 8     # layers named in the ranking note: the search keeps the first few, the tail is near zero


def kv_repaired_lines(m: ModelReport) -> list[str]:
    repaired = [r for r in m.rows if r.facts.kv_repair is not None]
    if not repaired:
        return []
    lines = ["### Repaired KV modes (layers kept in the model's dtype)", "",
             "Each layer ranked by the KL (full vocabulary, every position) of the format's rounding on its "
             "K/V alone, on the repair's texts fed through the cache; the top-ranked layers kept, their number "
             "bisected until the KL of the whole cache meets the mode's `repair.max_kl`. The mode is then "
             "served with `--kv-cache-dtype-skip-layers` and judged like any variant, on the tasks.", "",
             md_row(["Variant", "Verdict", "Layers kept", "KL: none kept -> kept (bound)", "Bytes/token: "
                     "format -> repaired (model dtype)", "Search"]), "|" + "---|" * 6]
    notes = []
    for r in repaired:
        rep = r.facts.kv_repair
        if rep.get("status") != "ok":
            lines.append(md_row([r.variant, status_cell(r), "–", "–", "–", rep.get("reason", "–")]))
            continue
        tried, b = rep["tried"], rep["bytes_per_token"]
        fmt = next(v for k, v in b.items() if k not in ("auto", "repaired"))
        lines.append(md_row([r.variant, status_cell(r), f"{rep['kept']} of {rep['layers']}: "
                             f"{', '.join(map(str, rep['skip_layers'])) or 'none'}",
                             f"{tried['0']:.4f} -> {tried[str(rep['kept'])]:.4f} ({rep['bound']})",
                             f"{fmt:,} -> {b['repaired']:,} ({b['auto']:,})",
                             f"{len(tried)} candidates; {rep['stopped']}"]))
        ranking = ", ".join(f"{i} ({kl:.4f})" for i, kl in rep["ranking"][:TOP])
        notes.append(f"`{r.variant}` ({rep['cache_dtype']}): layers by KL alone, costliest first: {ranking}, ... "
                     f"({rep['texts']} {rep['data']} texts, {rep['positions']:,} positions, "
                     f"{rep['compute_dtype']}; {rep['seconds']:.0f} s).")
    return lines + [""] + notes + [""]
