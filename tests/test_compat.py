import pytest
import torch

from pipeline.domain.hardware import machine
from pipeline.quant import compat

pytestmark = pytest.mark.model


@pytest.fixture
def cache_cls(monkeypatch):
    """llm-compressor's IntermediatesCache, with pin_memory restored after the test."""
    from llmcompressor.pipelines.cache import IntermediatesCache

    monkeypatch.setattr(IntermediatesCache, "pin_memory", IntermediatesCache.pin_memory)
    return IntermediatesCache


def test_pin_memory_patch_makes_awq_cache_usable_without_accelerator(cache_cls, monkeypatch):
    from llmcompressor.pipelines.cache import IntermediateValue

    monkeypatch.setattr(compat, "accelerator_available", lambda: False)
    cache = cache_cls([{"x": IntermediateValue(value=torch.ones(3), device=torch.device("cpu"))}])
    assert compat.patch_llmcompressor_pin_memory() is True
    assert cache_cls.pin_memory._qtier_noop
    assert compat.patch_llmcompressor_pin_memory() is True      # idempotent
    cache.pin_memory(0)                                         # raised before the patch (no accelerator)
    assert torch.equal(cache.batch_intermediates[0]["x"].value, torch.ones(3))


def test_pin_memory_is_left_alone_with_an_accelerator(cache_cls, monkeypatch):
    original = cache_cls.pin_memory
    monkeypatch.setattr(compat, "accelerator_available", lambda: True)
    assert compat.patch_llmcompressor_pin_memory() is False
    assert cache_cls.pin_memory is original


@pytest.mark.parametrize("present", [True, False])
def test_accelerator_detection_asks_torch(monkeypatch, present):
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: present)
    assert machine.accelerator_available() is present


def test_unpatched_pin_memory_really_fails_here():
    """Guards the workaround: if upstream fixes this, the test tells us the patch can go."""
    if machine.accelerator_available():
        pytest.skip("an accelerator is present: pin_memory works here and the patch is never applied")
    try:
        torch.ones(2).pin_memory()
    except RuntimeError as e:
        assert "accelerator" in str(e).lower()
    else:
        pytest.fail("pin_memory works without an accelerator now: drop pipeline/quant/compat.py's patch")
