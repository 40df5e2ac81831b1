"""Where a result was measured and with what: result.json's "measured_on" and the package versions
of the pipeline's own environment.

measured_on (read by decide for decision.md's header and rows, never decide's own machine):
  {"cpu": {"model", "isa", "cores"}, "accelerator": null | {"name", "capability"},
   "torch_threads": int | null, "engine": {"name": "reference" | "vllm", "version": str | null}}
The engine version comes from the environment that served: transformers in this process for the
reference backend, the vLLM server's own GET /version for vLLM (its venv is not this one).
torch_threads is the serving process's torch.get_num_threads() where that process is this one
(reference); vLLM sets its workers' threads itself, so it is null there.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from pipeline.domain.hardware import machine

PACKAGES = ("torch", "transformers", "llmcompressor", "compressed-tensors", "lm-eval", "sacrebleu",
            "rouge-score", "bitsandbytes")


def versions(lookup=version) -> dict[str, str]:
    """The pipeline environment's versions of the packages that shape a result (the installed ones).
    The serving engine's version is measured_on's, read where it served."""
    found = {}
    for pkg in PACKAGES:
        try:
            found[pkg] = lookup(pkg)
        except PackageNotFoundError:
            pass
    return found


def measured_on(engine: str, engine_version: str | None, cpu: dict, accelerator: dict | None,
                torch_threads: int | None) -> dict:
    """The "measured_on" record from its facts; `cpu` as machine.cpu_info() returns it. Pure."""
    return {"cpu": {"model": cpu["cpu"], "isa": list(cpu["isa"]), "cores": cpu["cores"]},
            "accelerator": accelerator, "torch_threads": torch_threads,
            "engine": {"name": engine, "version": engine_version}}


def of_machine(engine: str, cpu_info=machine.cpu_info, accelerator_info=machine.accelerator_info) -> dict:
    """measured_on where no session started (the engine could not serve here): this machine, with
    its accelerator if it has one; engine version and threads unknown."""
    return measured_on(engine, None, cpu_info(), accelerator_info(), None)


def of_session(engine: str, engine_version: str | None, info: dict, cpu_info=machine.cpu_info,
               accelerator_info=machine.accelerator_info) -> dict:
    """measured_on of a session that served on this machine: its accelerator only when the session
    ran on one (info["device"] not "cpu"), its torch threads as the session recorded them."""
    on_accelerator = info.get("device", "cpu") != "cpu"
    return measured_on(engine, engine_version, cpu_info(), accelerator_info() if on_accelerator else None,
                       info.get("torch_threads"))
