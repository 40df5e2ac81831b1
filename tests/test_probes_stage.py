"""Stage probes (pipeline/stages/probes.py) with two real tokenizers of different vocabularies: a
character-level one and a word-level one. Each model's prompts measure the stated length within 1% in
its own tokenizer, the same spec writes different prompts for each, and a set the model's context cannot
hold stops the stage with one line (model tier: transformers' tokenizers, no model)."""
from __future__ import annotations

import json
import os
import string
import subprocess
import sys

import pytest

from pipeline.domain import probe_sets
from pipeline.io import read_jsonl
from pipeline.stages import probes

pytestmark = pytest.mark.model


def tokenizer_folder(path, level: str, context: int = 8192):
    """A Hugging Face folder with only a tokenizer (and a config stating the context): `char` makes
    every character a token, `word` every whitespace-separated word."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if level == "char":
        vocab = {c: i for i, c in enumerate(["[UNK]", *string.printable])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    else:
        tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path.mkdir(parents=True)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)
    (path / "config.json").write_text(json.dumps({"max_position_embeddings": context}))
    return path


def test_each_tokenizer_s_prompts_measure_the_stated_length(tmp_path):
    wanted = {"retrieval_2048": probe_sets.parse("x", "retrieval:2048")}
    found = {}
    for level in ("char", "word"):
        out = tmp_path / f"{level}-out"
        out.mkdir()
        written = probes.write(wanted, tokenizer_folder(tmp_path / level, level), out)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tmp_path / level)
        rows = read_jsonl(out / "retrieval_2048.jsonl")
        counted = [len(tok(r["prompt"], add_special_tokens=False).input_ids) for r in rows]
        assert len(rows) == 3 and all(0.99 * 2048 <= n <= 2048 for n in counted), (level, counted)
        assert written["retrieval_2048"] == {"tokens": 2048, "samples": 3, "longest_prompt": max(counted)}
        found[level] = rows
    words = [len(r["prompt"].split()) for r in found["char"]]
    assert max(words) < 0.5 * 2048 and found["char"] != found["word"]     # a char-level prompt is far fewer words


def test_a_set_the_model_cannot_hold_stops_the_stage_in_one_line(tmp_path, root):
    """Through the stage's main, on a project whose model's context is 2,048 tokens (a hub model's is
    first known here, after prepare)."""
    import shutil

    import yaml

    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = {"m": {"source": "hub:someone/model"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    tokenizer_folder(tmp_path / "artifacts/m/source", "word", context=2048)
    r = subprocess.run([sys.executable, "-m", "pipeline.stages.probes", "m"], cwd=tmp_path, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "qtier: m: eval.tasks.retrieval_2048.data: retrieval:2048 needs 2,144 tokens (2,048-token prompts, 32 answer "
        "tokens and a chat template) and the model's context (max_position_embeddings) is 2,048: lower the length or "
        "drop the task")
    assert not (tmp_path / "artifacts/m/probes").exists()
