import torch

from pipeline.quant import compat


def test_pin_memory_patch_makes_awq_cache_usable_without_accelerator():
    from llmcompressor.pipelines.cache import IntermediatesCache, IntermediateValue

    if compat.accelerator_available():
        assert compat.patch_llmcompressor_pin_memory() is False
        return
    cache = IntermediatesCache([{"x": IntermediateValue(value=torch.ones(3), device=torch.device("cpu"))}])
    assert compat.patch_llmcompressor_pin_memory() is True
    assert compat.patch_llmcompressor_pin_memory() is True      # idempotent
    cache.pin_memory(0)                                         # raised before the patch
    assert torch.equal(cache.batch_intermediates[0]["x"].value, torch.ones(3))


def test_unpatched_pin_memory_really_fails_here():
    """Guards the workaround: if upstream fixes this, the test tells us the patch can go."""
    if compat.accelerator_available():
        return
    try:
        torch.ones(2).pin_memory()
    except RuntimeError as e:
        assert "accelerator" in str(e).lower()
    else:
        raise AssertionError("pin_memory works without an accelerator now: drop pipeline/quant/compat.py's patch")
