"""How much of K and V do calibrated fp8 KV scales clip? vLLM stores x / scale in float8_e4m3, whose
largest value is 448, so every element above 448 x scale saturates.

    python -m benchmarks.kv_scale_clipping                       # smollm2-135m, calibrated mode fp8-cal
    python -m benchmarks.kv_scale_clipping smollm2-135m fp16 fp8-cal --n 32

Needs stage kvscales' checkpoint (a KV mode with `scale: calibrated`, then `dvc repro`). Runs the tier's
own checkpoint in float32 through the reference backend's attention and counts, per layer, the K/V
elements beyond the calibrated limit, on three inputs: the calibration texts, the classification
task's sentences with the chat template applied (as lm-eval sends them), and the same sentences plain.
Prints the clipped share and the largest value over its limit, with the worst layer. docs/runs/calibrated-fp8-kv.md.
"""
from __future__ import annotations

import argparse

from pipeline import io, paths, schema
from pipeline.engines.reference import kvcache
from pipeline.domain.sets import calibration
from pipeline.quant.scales import checkpoint_scales


class Counter:
    """Attention that counts K/V elements beyond each layer's fp8 limit, then attends unrounded."""

    def __init__(self):
        self.per_layer: dict[str, list[float]] = {}

    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        k_lim, v_lim = module.qtier_k_scale * kvcache.FP8_E4M3_MAX, module.qtier_v_scale * kvcache.FP8_E4M3_MAX
        d = self.per_layer.setdefault(module.qtier_name, [0, 0, 0, 0.0, 0.0])
        d[0] += int((key.abs() > k_lim).sum())
        d[1] += int((value.abs() > v_lim).sum())
        d[2] += key.numel()
        d[3] = max(d[3], float(key.abs().max()) / k_lim)
        d[4] = max(d[4], float(value.abs().max()) / v_lim)
        return kvcache.grouped_sdpa(module, query, key, value, attention_mask, **kwargs)

    def summary(self) -> str:
        n = sum(v[2] for v in self.per_layer.values())
        k_worst = max(self.per_layer.items(), key=lambda kv: kv[1][3])
        v_worst = max(self.per_layer.items(), key=lambda kv: kv[1][4])
        return (f"K clipped {sum(v[0] for v in self.per_layer.values()) / n:.4%} (largest {k_worst[1][3]:.2f}x its "
                f"limit, {k_worst[0]}); V clipped {sum(v[1] for v in self.per_layer.values()) / n:.4%} "
                f"(largest {v_worst[1][4]:.2f}x, {v_worst[0]})")


def main() -> None:
    import torch
    from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="smollm2-135m")
    ap.add_argument("tier", nargs="?", default="fp16")
    ap.add_argument("kv", nargs="?", default="fp8-cal")
    ap.add_argument("--n", type=int, default=32, help="classification sentences")
    args = ap.parse_args()
    params = schema.load()
    ckpt = paths.serving_checkpoint(args.model, args.tier, args.kv, calibrated=True)
    scales = checkpoint_scales(ckpt)
    if not scales:
        raise SystemExit(f"qtier: {ckpt} carries no k/v scales (add a KV mode with scale: calibrated, dvc repro)")
    counter = Counter()
    AttentionInterface.register("qtier_count", counter)
    ALL_MASK_ATTENTION_FUNCTIONS.register("qtier_count", sdpa_mask)
    tok = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModelForCausalLM.from_pretrained(paths.tier_dir(args.model, args.tier), dtype=torch.float32,
                                                 attn_implementation="qtier_count").eval()
    kvcache.set_layer_scales(model, scales)
    for name, module in model.named_modules():
        if hasattr(module, "k_proj"):
            module.qtier_name = name
    task = params.eval.tasks["classification"]
    sentences = [r[task.fields["text"]] for r in io.read_jsonl(task.data)[: args.n]]

    def run(label: str, texts: list[str], chat: bool) -> None:
        counter.per_layer.clear()
        for t in texts:
            if chat:
                ids = tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                              return_tensors="pt", return_dict=True)["input_ids"]
            else:
                ids = tok(t, return_tensors="pt").input_ids
            with torch.inference_mode():
                model(ids)
        print(f"{label:<42} {counter.summary()}")

    print(f"{ckpt}: {len(scales)} layers, limits 448 x k_scale / v_scale")
    run(f"calibration texts ({params.calibration.num_samples}), plain", calibration.texts(params.calibration), False)
    run(f"classification ({args.n}), chat template", sentences, True)
    run(f"classification ({args.n}), plain", sentences, False)


if __name__ == "__main__":
    main()
