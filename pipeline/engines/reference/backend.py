"""Reference backend: transformers through lm-eval's HFLM, on the GPU in the model's dtype when one is
there, else on the CPU in bfloat16 where it is native and float32 where it is not
(pipeline/domain/hardware/compute.py: reference_placement).

compressed-tensors checkpoints are decompressed at load; W8A8 layers then compute as vLLM's kernels
do, from the checkpoint's 8-bit codes and scales (int8: exact integer accumulation, float32 scales;
fp8: e4m3 operands, float32 accumulation: pipeline/engines/reference/w8a8.py), not through compressed-tensors'
fake quantization. Speed is not the engine's (dense float kernels). fp8 KV cache is simulated
(pipeline/engines/reference/kvcache.py).
"""
from __future__ import annotations

import dataclasses
import time
from importlib.metadata import version
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pipeline.engines.reference import arch, arithmetic, dists, kv_formats, kvcache, w8a8, w8a8_gemm
from pipeline.engines.reference.lm import reference_lm_class
from pipeline.engines.base import TokenDists, Unsupported, Variant
from pipeline.domain.hardware import compute
from pipeline.domain.model import bos
from pipeline.domain.hardware.machine import accelerator_available, cpu_info, native_bf16
from pipeline.io import read_json
from pipeline.quant.scales import checkpoint_scales
from pipeline.quant.w8a8_scheme import W8A8SchemeError, checkpoint_schemes
from pipeline.schema import Eval, Reference


def bnb_config(options: dict, compute_dtype):
    from transformers import BitsAndBytesConfig

    opts = dict(options)
    if opts.get("load_in_4bit"):
        opts.setdefault("bnb_4bit_compute_dtype", compute_dtype)
    return BitsAndBytesConfig(**opts)


def weight_quantization(hf_config: dict) -> dict | None:
    """The checkpoint's quantization_config without its kv_cache_scheme, None when nothing else is
    quantized. The reference backend applies k/v scales itself (pipeline/engines/reference/kvcache.py), as vLLM
    does, rather than through compressed-tensors' own KV hooks. Pure."""
    qc = hf_config.get("quantization_config")
    if not qc:
        return None
    if "kv_cache_scheme" not in qc:
        return qc
    rest = {k: v for k, v in qc.items() if k != "kv_cache_scheme"}
    return rest if rest.get("config_groups") else None


def _span(scales: dict[str, tuple[float, float]], i: int) -> str:
    values = [pair[i] for pair in scales.values()]
    return f"{min(values):.3g}-{max(values):.3g}"


def _config_without_kv_scheme(path: Path, trust_remote_code: bool, rest: dict | None):
    """The checkpoint's config with its quantization_config reduced to the weights' (`rest`, from
    weight_quantization)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    if rest is None:
        del config.quantization_config
    else:
        config.quantization_config = rest
    return config


def serving_weight_bytes(model, serving_dtype: str) -> int:
    """Weight bytes as served: integer-packed tensors at their size, float ones in the serving dtype
    (the reference backend computes in float32, the deployment stores float16/bfloat16)."""
    import torch

    float_bytes = torch.empty(0, dtype=getattr(torch, serving_dtype)).element_size()
    total = 0
    for p in model.parameters():
        if p.dtype.is_floating_point:
            total += p.numel() * float_bytes
        else:
            total += p.numel() * p.element_size()
    return total


class ReferenceSession:
    loglik_refusal = None      # the model itself: every log-prob is there
    full_logits = True      # exact_fidelity: the full-vocabulary KL against the baseline

    def __init__(self, model, tokenizer, lm, info: dict[str, Any], chat: bool, add_bos: bool,
                 backend: ReferenceBackend | None = None):
        self.model, self.tokenizer, self.lm, self.info, self.chat = model, tokenizer, lm, info, chat
        self.add_bos = add_bos
        self.backend = backend
        self.engine_version = version("transformers")     # the engine is transformers, in this process

    def remaining_s(self) -> None:
        """The reference backend has no time budget: it runs every task to the end."""
        return None

    def token_dists(self, seqs: list[list[int]], k: int) -> list[TokenDists]:
        return dists.token_dists(self.model, seqs, k)

    def second_arithmetic(self, variant: Variant):
        """The variant loaded again in serving.reference.noise_arithmetic, beside this one."""
        return ReferenceBackend(self.backend.ref, self.backend.ev, noise=True).session(variant)

    def exact_fidelity(self, baseline: Variant, seqs: list[list[int]]) -> list[tuple[Any, Any]]:
        """Full-vocabulary KL(baseline || this variant) and top-1 agreement per position: the baseline is
        loaded beside this variant, as this backend loads any variant, so both are at one dtype."""
        with self.backend.plain().session(baseline) as base:
            return dists.exact(base.model, self.model, seqs)

    def _encode(self, prompts: list[str]):
        if self.chat:
            prompts = [self.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                          add_generation_prompt=True) for p in prompts]
        self.tokenizer.padding_side = "left"
        encs = [bos.encode(self.tokenizer, p, self.add_bos) for p in prompts]
        return self.tokenizer.pad({"input_ids": encs}, padding="longest", return_tensors="pt")

    def throughput(self, prompts: list[str], new_tokens: int, repeats: int) -> dict[str, float]:
        import torch

        batch = self._encode(prompts).to(self.model.device)
        kwargs = dict(do_sample=False, pad_token_id=self.tokenizer.pad_token_id)
        with torch.inference_mode():
            self.model.generate(**batch, max_new_tokens=2, min_new_tokens=2, **kwargs)  # warm-up
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                self.model.generate(**batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **kwargs)
                best = min(best, time.perf_counter() - t0)
        total = len(prompts) * new_tokens
        return {"batch_size": len(prompts), "new_tokens": new_tokens, "seconds": round(best, 3),
                "gen_tokens_per_s": round(total / best, 2)}


class ReferenceBackend:
    name = "reference"

    def __init__(self, ref: Reference, ev: Eval, noise: bool = False):
        """noise: compute in the second arithmetic (serving.reference.noise_arithmetic; stage noise)."""
        self.ref, self.ev, self.noise = ref, ev, noise

    def plain(self) -> ReferenceBackend:
        """This backend in the run's own arithmetic (the baseline a noise session is compared with)."""
        return ReferenceBackend(self.ref, self.ev)

    def placement(self, variant: Variant) -> compute.Placement:
        """cuda in the model's dtype when a GPU is there, else the CPU in bfloat16 where it is native and
        float32 where not (serving.reference.dtype overrides the dtype on either)."""
        return compute.reference_placement(accelerator_available(), variant.model_cfg.dtype, self.ref.dtype,
                                           native_bf16(cpu_info()))

    @contextmanager
    def session(self, variant: Variant) -> Iterator[ReferenceSession]:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.ref.num_threads:
            torch.set_num_threads(self.ref.num_threads)
        place = self.placement(variant)
        alt = arithmetic.resolve(self.ref.noise_arithmetic, place.dtype) if self.noise else None
        if alt == arithmetic.FLOAT32:
            place = dataclasses.replace(place, dtype="float32")
        kwargs: dict[str, Any] = {"dtype": getattr(torch, place.dtype),
                                  "trust_remote_code": variant.model_cfg.trust_remote_code}
        if place.device != "cpu":
            kwargs["device_map"] = place.device
        info: dict[str, Any] = {"backend": self.name, "device": place.device, "dtype": place.dtype,
                                "compute_dtype": place.dtype, "torch_threads": torch.get_num_threads()}
        kv = variant.kv_cfg
        path = variant.serve_path
        scales = checkpoint_scales(path) if kv.calibrated else {}
        if kv.calibrated and not scales:
            raise Unsupported(f"{path} carries no k/v scales (stage kvscales makes them)")
        other_format = kv.cache_dtype not in ("auto", "fp8_e4m3") or bool(kv.skip_layers)
        if other_format:
            try:
                kv_formats.round_trip(kv.cache_dtype)
            except kv_formats.NotSimulated as e:
                raise Unsupported(str(e)) from None
            kwargs["attn_implementation"] = kv_formats.register()
            skipped = f", layers {list(kv.skip_layers)} kept in {place.dtype}" if kv.skip_layers else ""
            info["kv_cache"] = (f"{kv.cache_dtype} simulated ({kv_formats.FORMATS[kv.cache_dtype].simulation}"
                                f"{skipped}; pipeline/engines/reference/kv_formats.py)")
        elif kv.cache_dtype == "fp8_e4m3":
            kwargs["attn_implementation"] = kvcache.register()
            how = (f"calibrated per-layer scales from the checkpoint (k {_span(scales, 0)}, v {_span(scales, 1)})"
                   if kv.calibrated else f"scale {kv.scale:g}, uncalibrated like vLLM's default")
            info["kv_cache"] = f"fp8_e4m3 simulated (K/V rounded through float8_e4m3fn, {how})"
        elif kv.cache_dtype == "auto":
            kwargs["attn_implementation"] = kvcache.register(fp8=False)
            info["kv_cache"] = f"auto ({place.dtype}, not quantized)"
        else:
            raise Unsupported(f"kv cache dtype {kv.cache_dtype!r} is not implemented by the reference backend")

        hf_config = read_json(path / "config.json") if (path / "config.json").is_file() else None
        weights_quant = weight_quantization(hf_config or {})
        try:
            w8a8_schemes = checkpoint_schemes(weights_quant or {})   # refused before the model loads
        except W8A8SchemeError as e:
            raise Unsupported(str(e)) from None
        if "kv_cache_scheme" in ((hf_config or {}).get("quantization_config") or {}):
            kwargs["config"] = _config_without_kv_scheme(path, variant.model_cfg.trust_remote_code, weights_quant)
        if variant.load_quantization is not None:
            kwargs["quantization_config"] = bnb_config(variant.load_quantization, kwargs["dtype"])
            info["quantized_at_load"] = f"bitsandbytes {variant.load_quantization}"
        elif (weights_quant or {}).get("quant_method") == "compressed-tensors":
            from transformers import CompressedTensorsConfig

            # Decompress to dense float on load (fp8 weights otherwise stay float8 and CPU matmul fails);
            # W8A8 layers are then re-routed to the engine's arithmetic (w8a8.install, below).
            kwargs["quantization_config"] = CompressedTensorsConfig(run_compressed=False)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = arch.load(AutoModelForCausalLM, path, kwargs, info, fp8=kv.cache_dtype != "auto")
        info["weight_bytes_serving"] = serving_weight_bytes(model, variant.model_cfg.dtype)
        if alt is not None:
            layers = arithmetic.described(*arithmetic.bf16_operands(model)) if alt == arithmetic.BF16_OPERANDS else ""
            info["arithmetic"] = f"{alt}: {arithmetic.DESCRIBED[alt]}{layers}"
        if w8a8_schemes:
            impl = "float32"
            if place.device == "cpu" and any(sc.kind == "int8" for sc in w8a8_schemes.values()):
                # timed at the widest W8A8 layer's shape: the two are bit-identical, only their speed differs
                k, n = max(((m.in_features, m.out_features) for m, _ in w8a8.w8a8_modules(model).values()
                            if isinstance(m, torch.nn.Linear)), key=lambda s: s[0] * s[1], default=(1, 1))
                impl, info["w8a8_gemm_ms"] = w8a8_gemm.fastest_impl(k, n)
                info["w8a8_gemm"] = impl
            try:
                done = w8a8.install(model, path, impl)
            except W8A8SchemeError as e:
                raise Unsupported(str(e)) from None
            if not done:
                raise RuntimeError(f"{path}: config.json declares W8A8 groups {sorted(w8a8_schemes)} but no "
                                   "loaded layer carries a W8A8 scheme")
            info["w8a8_arithmetic"], info["w8a8_layers"] = done["arithmetic"], done["layers"]
        if kv.calibrated:
            info["kv_layers_quantized"] = kvcache.set_layer_scales(model, scales)
        elif kv.cache_dtype != "auto":
            info["kv_layers_quantized"] = kvcache.set_scales(model, kv.scale, kv.scale)
        if other_format:
            try:
                info["kv_layers_quantized"] = kv_formats.install(model, kv.cache_dtype, tuple(kv.skip_layers))
            except kv_formats.NotSimulated as e:
                raise Unsupported(str(e)) from None
        lm = reference_lm_class(variant.add_bos)(pretrained=model, tokenizer=tokenizer, batch_size=self.ev.batch_size,
                  max_length=getattr(model.config, "max_position_embeddings", 2048))
        info["shared_prompt_prefix"] = lm.qtier_share_prefix
        try:
            yield ReferenceSession(model, tokenizer, lm, info, variant.chat, variant.add_bos, self)
        finally:
            del lm, model
