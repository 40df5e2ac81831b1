"""result.json, the contract between the evaluating stages (baseline, evaluate, noise) and what reads
them (decide, a variant's looks, backend_diff): a versioned set of fields, written through `stamp`
and read through `load`, which name the file and the field when one is missing, unknown or of an
older version. A partial or stale result stops its reader; it never reads as empty metrics.

    from pipeline.domain.result import contract
    res = contract.load(path)       # a Result; res.metrics, res.looks, res.serving.startup_s
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline import io
from pipeline.domain.result import records
from pipeline.domain.result.facts import Fidelity, LongContext, MeasuredOn, Serving, Throughput, TokenizerCheck
from pipeline.domain.result.records import ArithmeticCheck, SampleCounts, TaskLooks

VERSION = 4             # 2: not_run is task -> why (NOT_RUN); 3: stopped and cut say where, not_run what was left;
                        # 4: arithmetic_check.status is one of CHECK_STATES
KINDS = ("variant", "noise")          # evaluate's and baseline's; the noise floor's (the second arithmetic)
# "not measured": the time budget (serving.vllm.budget) ended before the variant's first look completed;
# the engine serves it, so it is not "unsupported" (what the engine refuses)
NOT_MEASURED = "not measured"
STATUSES = {"variant": ("ok", "unsupported", "failed", NOT_MEASURED),
            "noise": ("ok", "unsupported", "failed", "off")}
# keys every result has; keys an "ok" one has (a value may be null where its producer says so); a
# result that is not ok says why (`reason`)
ALWAYS = {"variant": ("schema_version", "kind", "model", "tier", "kv", "status", "seconds"),
          "noise": ("schema_version", "kind", "model", "status", "seconds")}
OK = {"variant": ("backend", "chat_template", "add_bos_token", "tokenizer_check", "serving",
                  "compute_dtype", "measured_on", "metrics", "higher_is_better", "num_samples", "versions",
                  "throughput", "phases"),
      "noise": ("tier", "kv", "backend", "serving", "arithmetic", "compute_dtype", "measured_on", "metrics",
                "higher_is_better", "versions", "sample_cache")}
NOT_OK = ("reason",)
# why a task was not run: a gated metric failed (the looks stop the variant), the variant cannot pass
# (eval.sequential.probes: passable), or the time budget ran out before it started
FAILED, CANNOT_PASS, TIME_BUDGET = "the variant failed", "cannot pass", "time budget"
NOT_RUN = (FAILED, CANNOT_PASS, TIME_BUDGET)
# arithmetic_check.status, the one state of a variant's second arithmetic (docs/decision-rule.md "Engine
# noise"): checked (each settled verdict read again in it; one it contradicts is unstable); not needed
# (nothing settled, or the variant could no longer pass); skipped (the user's eval.noise_floor: false, or
# eval.sequential: null, whose fixed-n read has no looks to check); impossible (the engine has none: an
# endpoint, a backend without one, stage noise unsupported or failed). Skipped and impossible verdicts
# rest on the run's arithmetic alone, and page 1 says so.
CHECKED, NOT_NEEDED, SKIPPED, IMPOSSIBLE = "checked", "not needed", "skipped", "impossible"
CHECK_STATES = (CHECKED, NOT_NEEDED, SKIPPED, IMPOSSIBLE)
ONE_ARITHMETIC = (SKIPPED, IMPOSSIBLE)


@dataclass(frozen=True)
class Result:
    """One result.json, typed. Fields a status does not require default to empty."""
    kind: str
    model: str
    status: str
    seconds: float
    schema_version: int = VERSION
    tier: str | None = None
    kv: str | None = None
    reason: str | None = None
    backend: str | None = None
    arithmetic: str | None = None                 # noise: the second arithmetic it ran in
    chat_template: bool | None = None
    add_bos_token: bool | None = None
    tokenizer_check: TokenizerCheck | None = None
    serving: Serving | None = None
    compute_dtype: str | None = None
    measured_on: MeasuredOn | None = None
    metrics: dict[str, float] = field(default_factory=dict)              # `<task>/<metric>` -> score
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    num_samples: dict[str, int] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    throughput: Throughput | None = None
    phases: dict[str, float] = field(default_factory=dict)
    sample_cache: SampleCounts | None = None
    fidelity: Fidelity | None = None
    long_context: LongContext | None = None
    looks: dict[str, TaskLooks] = field(default_factory=dict)
    stopped: str | None = None                    # the look where a gated metric failed (the tasks left: not_run)
    cut: str | None = None                        # where a time budget cut the looks (the tasks left: not_run)
    cannot_pass: str | None = None
    not_run: dict[str, str] = field(default_factory=dict)        # task -> why (NOT_RUN)
    arithmetic_check: ArithmeticCheck | None = None
    refused: dict[str, str] = field(default_factory=dict)
    reused: dict[str, str] = field(default_factory=dict)           # measurement -> when it was made (sample cache)
    copied_from: str | None = None                # a baseline row: the stage baseline's folder


KNOWN = {f.name for f in fields(Result)}


class ResultError(io.DataError):
    """A result.json that is not this version's contract."""


def problems(data: dict[str, Any]) -> list[str]:
    """What keeps `data` from being a result of this version: empty when it is one."""
    version = data.get("schema_version")
    if version != VERSION:
        return [f"schema_version {version} (this qtier reads {VERSION}): written by another qtier"]
    kind, status = data.get("kind"), data.get("status")
    if kind not in KINDS:
        return [f"kind {kind!r} is not one of {', '.join(KINDS)}"]
    if status not in STATUSES[kind]:
        return [f"status {status!r} is not one of {', '.join(STATUSES[kind])}"]
    need = ALWAYS[kind] + (OK[kind] if status == "ok" else NOT_OK if status != "off" else ())
    found = [f"missing field {k!r} (status {status})" for k in need if k not in data]
    check = data.get("arithmetic_check") or {}
    if check and (not isinstance(check, dict) or check.get("status") not in CHECK_STATES):
        found.append(f"arithmetic_check.status {check.get('status')!r} is not one of {', '.join(CHECK_STATES)}")
    found += [f"not_run[{t!r}] is {why!r}, not one of {', '.join(NOT_RUN)}"
              for t, why in (data.get("not_run") or {}).items() if why not in NOT_RUN]
    return found + [f"unknown field {k!r}" for k in data if k not in KNOWN]


def stamp(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """`data` with its version and kind, checked: a writer cannot write what `load` would refuse."""
    out = {"schema_version": VERSION, "kind": kind, **data}
    where = f"result.json of {data.get('model')}/{data.get('tier')}-{data.get('kv')}"
    if found := problems(out):
        raise ValueError(f"{where}: " + "; ".join(found))
    try:
        parse(out, where)                 # every record too: the looks, the check, serving, fidelity, ...
    except ResultError as e:
        raise ValueError(str(e)) from None
    return out


def parse(data: dict[str, Any], where: str) -> Result:
    if found := problems(data):
        raise ResultError(f"{where}: " + "; ".join(found) + "; re-run the stage that writes it (dvc repro)")
    # a null where the field is a mapping (a producer with nothing to say) reads as empty
    fields_ = {k: v for k, v in data.items() if v is not None or k not in MAPPINGS}
    try:
        return records.parse(Result, fields_, "result")     # every field and record, typed
    except records.RecordError as e:
        raise ResultError(f"{where}: {e}; re-run the stage that writes it (dvc repro)") from None


MAPPINGS = {f.name for f in fields(Result) if f.default_factory is dict}


def load(path: Path) -> Result:
    """The result at `path`; a missing, partial, unknown-keyed or other-version file is a ResultError
    naming the file and the field."""
    if not path.is_file():
        raise ResultError(f"{path}: missing; re-run the stage that writes it (dvc repro)")
    return parse(io.read_json(path), str(path))
