from pipeline.backends.reference import weight_quantization

KV = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True}


def test_the_reference_applies_kv_scales_itself_so_the_kv_scheme_is_dropped_from_the_load():
    groups = {"group_0": {"targets": ["Linear"]}}
    quantized = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": groups,
                                         "kv_cache_scheme": KV}}
    assert weight_quantization(quantized) == {"quant_method": "compressed-tensors", "config_groups": groups}
    kv_only = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {}, "kv_cache_scheme": KV}}
    assert weight_quantization(kv_only) is None                  # the baseline with scales: plain weights
    plain = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": groups}}
    assert weight_quantization(plain) is plain["quantization_config"]
    assert weight_quantization({}) is None
