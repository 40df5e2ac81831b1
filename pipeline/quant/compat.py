"""Narrow workarounds for upstream bugs, each in one place with the reason.

llm-compressor 0.14.0.1, AWQ on a machine with no accelerator: AWQModifier._apply_smoothing calls
IntermediatesCache.pin_memory(), and torch's Tensor.pin_memory() raises "Cannot access accelerator
device when none is available". Pinning only speeds up host-to-device copies, so without an
accelerator it is a no-op by definition; we make it one instead of failing.
"""
from __future__ import annotations

from pipeline.domain.hardware.machine import accelerator_available


def patch_llmcompressor_pin_memory() -> bool:
    """Make IntermediatesCache.pin_memory a no-op when no accelerator exists. Returns whether
    the patch was applied (never on a machine with a GPU, where pinning works)."""
    if accelerator_available():
        return False
    from llmcompressor.pipelines.cache import IntermediatesCache

    if getattr(IntermediatesCache.pin_memory, "_qtier_noop", False):
        return True

    def pin_memory(self, batch_index, input_names=None):  # noqa: ARG001 - same signature
        return None

    pin_memory._qtier_noop = True
    IntermediatesCache.pin_memory = pin_memory
    return True
