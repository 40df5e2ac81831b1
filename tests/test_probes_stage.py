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

from pipeline.domain.sets import probe_sets
from pipeline.io import read_jsonl
from pipeline.stages import probes

pytestmark = pytest.mark.model


# at most six characters of a word, with the space before it, a token: about 4.5 characters a token
# on English prose (4.47-4.61 on the shipped long texts), as a 262k-token vocabulary has; SmolLM2's
# 49k has about 4.4
PIECES_4_5 = r" ?[^\s]{1,6}|\s+"


def tokenizer_folder(path, level: str, context: int = 8192):
    """A Hugging Face folder with only a tokenizer (and a config stating the context): `char` makes
    every character a token, `word` every whitespace-separated word, `4.5` about 4.5 characters one."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if level == "char":
        vocab = {c: i for i, c in enumerate(["[UNK]", *string.printable])}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    elif level == "4.5":
        tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECES_4_5), behavior="isolated")
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


def project(tmp_path, root, level: str, context: int):
    """The shipped params and files, model m prepared from the hub with only a tokenizer of `level`."""
    import shutil

    import yaml

    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = {"m": {"source": "hub:someone/model"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    source = tokenizer_folder(tmp_path / "artifacts/m/source", level, context=context)
    (source / "qtier_source.json").write_text(json.dumps({"add_bos_token": False, "apply_chat_template": False}))
    return tmp_path


def run_stage(project, root):
    return subprocess.run([sys.executable, "-m", "pipeline.stages.probes", "m"], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root)})


def test_the_default_long_texts_reach_the_probe_at_4_5_characters_a_token(tmp_path, root):
    """Issue 55: at about 4.5 characters a token some shipped texts alone are under the default probe's
    4,097 tokens (fidelity_base used to stop on them after the baseline was quantized); stage probes
    continues each with the next text and passes, and says in long_texts.json what it read."""
    proj = project(tmp_path, root, "4.5", context=8192)
    r = run_stage(proj, root)
    assert r.returncode == 0, r.stderr
    record = json.loads((proj / "artifacts/m/probes/long_texts.json").read_text())
    texts = [json.loads(line) for line in (proj / "eval_sets/long_texts.jsonl").read_text().splitlines()]
    chars = {t["id"]: len(t["text"]) for t in texts}
    print("\n".join(f"{t}: {c['tokens_alone']} tokens alone ({chars[t] / c['tokens_alone']:.2f} characters a token)"
                    f", rows {'+'.join(c['rows'])}, starting at {c['starts']}" for t, c in record["texts"].items()))
    assert record["positions"] == 4096 and list(record["texts"]) == ["long-01", "long-02", "long-03"]
    alone = [c["tokens_alone"] for c in record["texts"].values()]
    assert all(4.3 < chars[t] / c["tokens_alone"] < 4.8 for t, c in record["texts"].items())   # the fixture's claim
    assert min(alone) < 4097, alone                             # one text alone is too short: the case of the issue
    for c in record["texts"].values():
        assert (len(c["rows"]) > 1) == (c["tokens_alone"] < 4097) and c["starts"][0] == 0
        assert all(c["tokens_alone"] <= s < 4097 for s in c["starts"][1:])


def test_long_texts_no_joining_can_bring_to_the_length_stop_the_stage_in_one_line(tmp_path, root):
    proj = project(tmp_path, root, "4.5", context=8192)
    (proj / "eval_sets/long_texts.jsonl").write_text(
        "".join(json.dumps({"id": f"short-{i}", "text": " ".join(["a", "short", "text"] * 100)}) + "\n" for i in range(3)))
    r = run_stage(proj, root)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "qtier: m: long text short-0: 300 tokens, 902 with all 3 texts joined; the probe needs 4097 (positions up to "
        "4096): lower eval.long_context.positions or add texts")
    assert not (proj / "artifacts/m/probes").exists()


def test_a_set_the_model_cannot_hold_stops_the_stage_in_one_line(tmp_path, root):
    """Through the stage's main, on a project whose model's context is 2,048 tokens (a hub model's is
    first known here, after prepare)."""
    r = run_stage(project(tmp_path, root, "word", context=2048), root)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "qtier: m: eval.tasks.retrieval_2048.data: retrieval:2048 needs 2,144 tokens (2,048-token prompts, 32 answer "
        "tokens and a chat template) and the model's context (max_position_embeddings) is 2,048: lower the length or "
        "drop the task")
    assert not (tmp_path / "artifacts/m/probes").exists()
