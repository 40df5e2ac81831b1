"""A published checkpoint as a tier (`method: published`, `checkpoint: local:<dir> | hub:<repo>`):
validated against the model's prepared source, described as its own config.json says, served from
where it is. Nothing is re-quantized.

Used by quantize@<model>-<tier>; check writes each published tier's fingerprint() to
artifacts/recipes/<tier>.yaml, so editing the folder re-runs that tier's stages alone.

    python -m pipeline.quant.published <checkpoint dir> <source dir>   # the checks, as quantize runs them
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

# Shape keys that must agree for the checkpoint to be the same model quantized (a text config nested
# under text_config, as multimodal configs do, is read too).
SHAPE_KEYS = ("model_type", "architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings")
# quant_method values vLLM loads from a config.json without a --quantization flag
KNOWN_METHODS = ("compressed-tensors", "gptq", "awq", "fp8", "bitsandbytes")
# files that define a checkpoint's identity cheaply: hashed whole; weights by name and size
SMALL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "tokenizer.model", "quantization_config.json", "recipe.yaml")


class Mismatch(ValueError):
    """The checkpoint is not this model's: one line naming the tier and what differs."""


def resolve(ref: str, revision: str | None = None) -> Path:
    """The folder `local:<dir>` names, or `hub:<repo>` downloaded (huggingface_hub's cache; offline
    runs read the cache only)."""
    kind, _, name = ref.partition(":")
    if kind == "local":
        return Path(name)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(name, revision=revision))


def _text_config(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg


def shape_mismatches(base: dict, ckpt: dict) -> list[str]:
    """`key: base value vs checkpoint value` for each shape key the two configs give differently (a key
    one of them leaves out is compared only when the model's own default would not decide it). Pure."""
    out = []
    for key in SHAPE_KEYS:
        # the family from the top level (a multimodal config nests its text model), sizes from the text model
        b, c = (base, ckpt) if key in ("model_type", "architectures") else (_text_config(base), _text_config(ckpt))
        if key in b and key in c and b[key] != c[key]:
            out.append(f"{key} {b[key]!r} vs {c[key]!r}")
    return out


def scheme(ckpt: dict) -> dict[str, Any]:
    """The quantization as the checkpoint's config.json states it: {"method", "summary", ...}; an
    unquantized checkpoint is its dtype. ValueError for a quantization_config nothing here can read. Pure."""
    q = ckpt.get("quantization_config")
    if not q:
        dtype = ckpt.get("torch_dtype") or ckpt.get("dtype") or "unknown dtype"
        return {"method": "none", "summary": f"unquantized {dtype}"}
    method = q.get("quant_method")
    if method not in KNOWN_METHODS:
        raise ValueError(f"quantization_config.quant_method {method!r} is not one of {', '.join(KNOWN_METHODS)}")
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if not groups:
            raise ValueError("compressed-tensors quantization_config has no config_groups")
        parts = [_ct_group(g) for g in groups.values()]
        kv = " + fp8 KV scales" if q.get("kv_cache_scheme") else ""
        return {"method": method, "format": q.get("format"), "summary": "; ".join(parts) + kv}
    if method in ("gptq", "awq"):
        bits = q.get("bits", q.get("w_bit"))
        group = q.get("group_size", q.get("q_group_size"))
        if bits is None:
            raise ValueError(f"{method} quantization_config has no bits")
        return {"method": method, "summary": f"{method} W{bits}A16 group {group}"}
    if method == "fp8":
        return {"method": method, "summary": f"fp8 weights, activations {q.get('activation_scheme', 'dynamic')}"}
    four = q.get("load_in_4bit")
    kind = q.get("bnb_4bit_quant_type", "fp4") if four else "int8"
    return {"method": method, "summary": f"bitsandbytes {kind}"}


def _ct_group(g: dict) -> str:
    w, a = g.get("weights") or {}, g.get("input_activations")
    if not w:
        raise ValueError("compressed-tensors config group without weights")
    wtxt = f"W{w.get('num_bits')} {w.get('type', 'int')} {w.get('strategy')}"
    if w.get("group_size"):
        wtxt += f" group {w['group_size']}"
    atxt = (f"A{a.get('num_bits')} {a.get('type', 'int')} {a.get('strategy')}"
            f"{' dynamic' if a.get('dynamic') else ' static'}") if a else "A16"
    return f"{wtxt}, {atxt}"


def tokenizer_mismatch(base_dir: Path, ckpt_dir: Path) -> str | None:
    """What differs between the two tokenizers (vocabulary, BOS/EOS, chat template), None if nothing:
    a checkpoint re-tokenizing prompts differently would be judged on other inputs."""
    from transformers import AutoTokenizer

    a, b = AutoTokenizer.from_pretrained(base_dir), AutoTokenizer.from_pretrained(ckpt_dir)
    if a.get_vocab() != b.get_vocab():
        return f"vocabulary differs ({len(a.get_vocab())} vs {len(b.get_vocab())} tokens)"
    for attr in ("bos_token_id", "eos_token_id"):
        if getattr(a, attr) != getattr(b, attr):
            return f"{attr} {getattr(a, attr)} vs {getattr(b, attr)}"
    if (a.chat_template or None) != (b.chat_template or None):
        return "chat template differs"
    return None


def validate(tier_key: str, ckpt_dir: Path, source_dir: Path) -> dict[str, Any]:
    """The checks quantize runs before any evaluation; Mismatch naming `tier_key` on the first failure.
    Returns the checkpoint's config.json and its scheme."""
    cfg_file = ckpt_dir / "config.json"
    if not cfg_file.is_file():
        raise Mismatch(f"{tier_key}.checkpoint: {ckpt_dir} has no config.json")
    ckpt = json.loads(cfg_file.read_text(encoding="utf-8"))
    base = json.loads((source_dir / "config.json").read_text(encoding="utf-8"))
    shapes = shape_mismatches(base, ckpt)
    if shapes:
        raise Mismatch(f"{tier_key}.checkpoint: not this model's architecture: {'; '.join(shapes)}")
    try:
        described = scheme(ckpt)
    except ValueError as e:
        raise Mismatch(f"{tier_key}.checkpoint: {e}") from None
    tok = tokenizer_mismatch(source_dir, ckpt_dir)
    if tok:
        raise Mismatch(f"{tier_key}.checkpoint: its tokenizer is not the model's: {tok}")
    return {"config": ckpt, "scheme": described}


def fingerprint(ckpt_dir: Path) -> str:
    """A text that changes when the checkpoint does: its small files' hashes, its weights' names and sizes."""
    lines = []
    for f in sorted(p for p in ckpt_dir.rglob("*") if p.is_file()):
        rel = f.relative_to(ckpt_dir).as_posix()
        if f.name in SMALL_FILES:
            lines.append(f"{rel} sha256 {hashlib.sha256(f.read_bytes()).hexdigest()}")
        elif f.suffix in (".safetensors", ".bin", ".pt", ".gguf"):
            lines.append(f"{rel} {f.stat().st_size} bytes")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    try:
        found = validate("checkpoint", Path(sys.argv[1]), Path(sys.argv[2]))
    except Mismatch as e:
        raise SystemExit(f"qtier: {e}") from None
    print(found["scheme"]["summary"])
