"""Where each result was measured, from its result.json "measured_on" (written by evaluate; typed as
domain/result/facts.py MeasuredOn), never from the machine decide runs on. Pure."""
from __future__ import annotations

from pipeline.domain.result.facts import MeasuredOn
from pipeline.scoring.verdict.rows import Row

NOT_RECORDED = "not recorded"
UNVERSIONED = "(version not recorded)"


def describe(on: MeasuredOn | None) -> str:
    """One machine as a reader needs it: CPU and ISA, cores, accelerator. (Torch threads belong to a
    session, not the machine: header_lines lists them per machine.)"""
    if on is None:
        return NOT_RECORDED
    isa = ", ".join(on.cpu.isa) or "no AVX2"
    acc = on.accelerator
    gpu = f"{acc.name} (compute capability {acc.capability})" if acc else "no accelerator"
    cores = on.cpu.cores if on.cpu.cores is not None else "?"
    return f"{on.cpu.model} ({isa}), {cores} cores, {gpu}"


def machines(rows: list[Row]) -> dict[str, str]:
    """description -> its key (A, B, ...) in the order the rows meet them; rows without a result
    (failed before evaluate wrote one) measured nothing and name no machine."""
    found: dict[str, str] = {}
    for r in rows:
        if r.facts.serving is None:
            continue
        desc = describe(r.facts.measured_on)
        if desc != NOT_RECORDED and desc not in found:
            found[desc] = chr(ord("A") + len(found)) if len(found) < 26 else f"M{len(found) + 1}"
    return found


def row_cell(r: Row, keys: dict[str, str]) -> str:
    """The row's machine key, or why there is none."""
    if r.facts.serving is None:
        return "–"
    return keys.get(describe(r.facts.measured_on), NOT_RECORDED)


def device(r: Row) -> str | None:
    """What generated the row's tokens: the accelerator's name, or CPU (None: not recorded)."""
    on = r.facts.measured_on
    if on is None:
        return None
    return on.accelerator.name if on.accelerator else "CPU"


def speed_header(rows: list[Row]) -> str:
    """`Gen tok/s (<device>)` when every timed row ran on one device, else the bare name."""
    found = {device(r) for r in rows if r.facts.tokens_per_s}
    return f"Gen tok/s ({found.pop()})" if len(found) == 1 and None not in found else "Gen tok/s"


def engine(r: Row) -> str | None:
    """`<engine> <version>` that served the row, from measured_on (None: not recorded)."""
    on = r.facts.measured_on
    return f"{on.engine.name} {on.engine.version or UNVERSIONED}" if on else None


def engines_of(rows: list[Row]) -> list[str]:
    """Each engine's recorded versions; `(version not recorded)` only for an engine no row has one of
    (a row evaluate could not serve records its machine without an engine version)."""
    found = list(dict.fromkeys(e for r in rows if (e := engine(r))))
    versioned = {e.split(" ", 1)[0] for e in found if not e.endswith(UNVERSIONED)}
    return [e for e in found if not (e.endswith(UNVERSIONED) and e.split(" ", 1)[0] in versioned)]


def header_lines(rows: list[Row], versions: dict[str, str]) -> list[str]:
    """The run's machines (with the rows measured on each) and versions, including the serving engines'."""
    keys = machines(rows)
    measured = [r for r in rows if r.facts.serving is not None]
    unrecorded = [r.variant for r in measured if describe(r.facts.measured_on) == NOT_RECORDED]
    lines = []
    for desc, key in keys.items():
        mine = [r.facts.measured_on for r in measured if describe(r.facts.measured_on) == desc]
        threads = sorted({on.torch_threads for on in mine if on and on.torch_threads is not None})
        lines.append(f"- **{key}**: {desc}; torch threads {', '.join(map(str, threads)) or NOT_RECORDED} "
                     f"({len(mine)} of {len(measured)} results)")
    if unrecorded:
        lines.append(f"- {NOT_RECORDED}: {len(unrecorded)} of {len(measured)} results record no `measured_on`")
    out = ["Measured on (from each result.json):", ""] + lines + [""]
    engines = engines_of(measured)
    if versions or engines:
        parts = [f"{k} {v}" for k, v in versions.items()]
        parts.append("engine " + (", ".join(engines) if engines else NOT_RECORDED))
        out += ["Versions (evaluate's environment, as recorded in the results): " + ", ".join(parts) + ".", ""]
    return out
