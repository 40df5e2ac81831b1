"""Complete result.json contents for tests that fake a stage's output (pipeline/domain/result/contract.py):
every field the contract requires, stamped with its version; a test names only what it is about. A test
of code that reads the typed records builds them here (`result`, `measured`: through the real parser),
never a dict or SimpleNamespace in their place (tests/test_typed_fixtures.py holds the suite to it)."""
from __future__ import annotations

import dataclasses
from typing import Any

from pipeline.domain.result import contract
from pipeline.schema import typed
from pipeline.scoring.verdict.rows import Measured

OK_VARIANT = {"backend": "reference", "chat_template": False, "add_bos_token": False, "tokenizer_check": None,
              "serving": {"backend": "reference", "device": "cpu"}, "compute_dtype": "float32", "measured_on": None, "metrics": {}, "higher_is_better": {},
              "num_samples": {}, "versions": {}, "throughput": {}, "phases": {}}
OK_NOISE = {"tier": "fp16", "kv": "auto", "backend": "reference", "serving": {"backend": "reference", "device": "cpu"}, "arithmetic": "bf16-operands: test",
            "compute_dtype": "float32", "measured_on": None, "metrics": {}, "higher_is_better": {}, "versions": {},
            "sample_cache": {}}


def variant(status: str = "ok", model: str = "m", tier: str = "fp16", kv: str = "auto", **fields: Any) -> dict:
    data = {"model": model, "tier": tier, "kv": kv, "status": status, "seconds": 1.0}
    fields = {k: typed.plain(v) for k, v in fields.items()}      # a typed record as result.json holds it
    data.update(OK_VARIANT if status == "ok" else {"reason": "a test's reason"})
    if isinstance(fields.get("serving"), dict) and fields["serving"] and "backend" not in fields["serving"]:
        # a test names the serving keys it is about; the engine's name and device are the variant's
        fields["serving"] = {"backend": fields.get("backend", "reference"), "device": "cpu", **fields["serving"]}
    elif fields.get("serving") == {}:
        fields["serving"] = OK_VARIANT["serving"]
    return contract.stamp({**data, **fields}, "variant")


def noise(status: str = "ok", model: str = "m", **fields: Any) -> dict:
    data = {"model": model, "status": status, "seconds": 1.0}
    data.update(OK_NOISE if status == "ok" else {"reason": "a test's reason"})
    return contract.stamp({**data, **fields}, "noise")


def result(status: str = "ok", **fields: Any) -> contract.Result:
    """A variant's result.json (`variant`) parsed as decide reads it: every record typed by the parser."""
    return contract.parse(variant(status, **fields), "a test's result.json")


# Measured's own fields, beside the result it holds (decide_inputs.build_row)
ROW_ONLY = ("scheme", "hardware", "weight_bytes", "kv_bytes_per_token", "serve_path", "kv_formula", "fidelity",
            "repair", "kv_skip_layers", "kv_repair")


def measured(tier: str = "fp16", kv: str = "auto", status: str = "ok", model: str = "m", **fields: Any) -> Measured:
    """A row's facts as decide_inputs.build_row makes them, holding `result(...)`: the typed records are
    the parser's, never a dict a reader would trip on only at decide's end. Fields named in ROW_ONLY are
    Measured's own; the rest are result.json's."""
    own = {k: fields.pop(k) for k in ROW_ONLY if k in fields}
    return Measured(model, tier, kv, result(status, model=model, tier=tier, kv=kv, **fields), **own)


def replaced(m: Measured, **fields: Any) -> Measured:
    """`m` with some of its result's fields changed (dataclasses.replace through the held Result)."""
    return dataclasses.replace(m, result=dataclasses.replace(m.result, **fields))
