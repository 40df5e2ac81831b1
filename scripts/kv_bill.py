"""The memory bill of every KV format vLLM serves, for one model on params' target GPUs: bytes per token
with scales and metadata, KV capacity and concurrency (the planner's, pipeline/scoring/planning/planner.py),
the decode roofline, and which GPUs' attention kernels serve it (pipeline/data/vllm_hardware.yaml).
Planned from arithmetic and vLLM's code, nothing measured; docs/kv-cache.md carries its output.

    .venv/bin/python -m scripts.kv_bill                       # SmolLM2-135M's geometry, bf16 weights
"""
from __future__ import annotations

import argparse

from pipeline.domain.hardware import kv_formats
from pipeline.schema import load as load_schema
from pipeline.scoring.planning import planner

SMOL = {"hidden_size": 576, "num_attention_heads": 9, "head_dim": 64, "num_hidden_layers": 30,
        "num_key_value_heads": 3}
SMOL_WEIGHT_BYTES = 2 * 134_515_008          # SmolLM2-135M's parameters in bfloat16


def rows(model: dict, weight_bytes: int, params_file: str = "params.yaml") -> list[str]:
    mem = load_schema(params_file).memory
    gpus = mem.target_gpus
    head_dim = model.get("head_dim") or model["hidden_size"] // model["num_attention_heads"]
    base = kv_formats.bytes_per_token(model, "auto", "bfloat16")
    head = (["| format | B/token | vs auto | scales, metadata / head | simulated | vLLM CPU | "
             + " | ".join(f"{g}: KV tokens, concurrency, roofline tok/s" for g in gpus) + " |"],
            ["|---" * (6 + len(gpus)) + "|"])
    out = [*head[0], *head[1]]
    for name, fmt in kv_formats.FORMATS.items():
        try:
            per_token = kv_formats.bytes_per_token(model, name, "bfloat16")
        except ValueError:
            continue
        cells = []
        for g, gpu in gpus.items():
            if not kv_formats.served_on(name, gpu.compute_capability, head_dim):
                cells.append("not served")
                continue
            p = planner.plan(g, gpu, mem, weight_bytes, per_token)
            cells.append(f"{p.kv_tokens:,}, {p.max_concurrency:,.0f}, {p.roofline_tokens_per_s:,.0f}")
        out.append(f"| `{name}` | {per_token:,} | {per_token / base:.3f} | {kv_formats.overhead(name, head_dim)} | "
                   f"{'yes' if fmt.simulated else 'no: ' + fmt.refusal} | "
                   f"{'serves' if name in kv_formats.CPU_SERVED else 'refused'} | {' | '.join(cells)} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    print("\n".join(rows(SMOL, SMOL_WEIGHT_BYTES, args.params)))


if __name__ == "__main__":
    main()
