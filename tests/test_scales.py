import pytest

from pipeline.quant import scales


def test_scales_pair_up_by_attention_module():
    found = scales.scales_by_module({"model.layers.1.self_attn.v_scale": 0.5, "model.layers.0.self_attn.k_scale": 0.1,
                                     "model.layers.0.self_attn.v_scale": 0.2, "model.layers.1.self_attn.k_scale": 0.4,
                                     "model.layers.0.self_attn.q_proj.weight_scale": 9.0})
    assert found == {"model.layers.0.self_attn": (0.1, 0.2), "model.layers.1.self_attn": (0.4, 0.5)}
    with pytest.raises(ValueError, match="model.layers.3.self_attn"):
        scales.scales_by_module({"model.layers.3.self_attn.k_scale": 0.1})


@pytest.mark.model
def test_checkpoint_scales_read_from_safetensors(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"model.layers.0.self_attn.k_scale": torch.tensor([0.25]),
               "model.layers.0.self_attn.v_scale": torch.tensor([0.125], dtype=torch.bfloat16),
               "model.layers.0.self_attn.k_proj.weight": torch.ones(4, 4)}, tmp_path / "model.safetensors")
    assert scales.checkpoint_scales(tmp_path) == {"model.layers.0.self_attn": (0.25, 0.125)}
    assert scales.checkpoint_scales(tmp_path / "nothing-here") == {}
    save_file({"a.self_attn.k_scale": torch.ones(3), "a.self_attn.v_scale": torch.ones(1)}, tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="one element"):
        scales.checkpoint_scales(tmp_path)


def test_summary_keeps_count_and_range():
    s = scales.scales_summary({"a": (0.1, 0.02), "b": (0.3, 0.01)})
    assert s == {"layers": 2, "k_scale": [0.1, 0.3], "v_scale": [0.01, 0.02]}
    with pytest.raises(ValueError, match="no k_scale"):
        scales.scales_summary({})
