"""Complete result.json contents for tests that fake a stage's output (pipeline/domain/result_json.py):
every field the contract requires, stamped with its version; a test names only what it is about."""
from __future__ import annotations

from typing import Any

from pipeline.domain import result_json

OK_VARIANT = {"backend": "reference", "chat_template": False, "add_bos_token": False, "tokenizer_check": None,
              "serving": {"backend": "reference", "device": "cpu"}, "compute_dtype": "float32", "measured_on": None, "metrics": {}, "higher_is_better": {},
              "num_samples": {}, "versions": {}, "throughput": {}, "phases": {}}
OK_NOISE = {"tier": "fp16", "kv": "auto", "backend": "reference", "serving": {"backend": "reference", "device": "cpu"}, "arithmetic": "bf16-operands: test",
            "compute_dtype": "float32", "measured_on": None, "metrics": {}, "higher_is_better": {}, "versions": {},
            "sample_cache": {}}


def variant(status: str = "ok", model: str = "m", tier: str = "fp16", kv: str = "auto", **fields: Any) -> dict:
    data = {"model": model, "tier": tier, "kv": kv, "status": status, "seconds": 1.0}
    data.update(OK_VARIANT if status == "ok" else {"reason": "a test's reason"})
    if isinstance(fields.get("serving"), dict) and fields["serving"] and "backend" not in fields["serving"]:
        # a test names the serving keys it is about; the engine's name and device are the variant's
        fields["serving"] = {"backend": fields.get("backend", "reference"), "device": "cpu", **fields["serving"]}
    elif fields.get("serving") == {}:
        fields["serving"] = OK_VARIANT["serving"]
    return result_json.stamp({**data, **fields}, "variant")


def noise(status: str = "ok", model: str = "m", **fields: Any) -> dict:
    data = {"model": model, "status": status, "seconds": 1.0}
    data.update(OK_NOISE if status == "ok" else {"reason": "a test's reason"})
    return result_json.stamp({**data, **fields}, "noise")
