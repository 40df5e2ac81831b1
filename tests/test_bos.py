"""models.<name>.add_bos_token (pipeline/domain/model/bos.py): resolved against the tokenizer, refused at check
when impossible, recorded, and applied by id. Fast: a fake tokenizer and JSON files, nothing loaded."""
import json
from types import SimpleNamespace

import pytest

from pipeline import io, paths, schema
from pipeline.domain.model import bos


class Tok:
    """A tokenizer whose ids are its characters' code points; BOS is id 1, text "<s>"."""
    def __init__(self, adds=False, bos_token_id=1):
        self.adds, self.bos_token_id = adds, bos_token_id
        self.bos_token = "<s>" if bos_token_id is not None else None

    def __call__(self, text, add_special_tokens=True):
        ids = [1] if text.startswith("<s>") else []
        ids += [ord(c) for c in text.removeprefix("<s>")]
        if self.adds and add_special_tokens and self.bos_token_id is not None:
            ids.insert(0, self.bos_token_id)
        return SimpleNamespace(input_ids=ids)


@pytest.mark.parametrize("param, adds, expected", [("auto", True, True), ("auto", False, False),
                                                   (True, False, True), (False, True, False)])
def test_resolve(param, adds, expected):
    assert bos.resolve("m", param, adds=adds, has=True, where="x") is expected


def test_true_without_a_bos_token_is_one_line_naming_the_key():
    with pytest.raises(schema.ConfigError, match=r"^models\.m\.add_bos_token: true, but models/m's tokenizer "
                                                 r"has no BOS token$"):
        bos.resolve("m", True, adds=False, has=False, where="models/m")
    assert bos.resolve("m", "auto", adds=False, has=False, where="x") is False     # auto never refuses


def test_encode_adds_bos_by_id_once_whatever_the_tokenizer_does():
    assert bos.encode(Tok(adds=False), "ab", True) == [1, 97, 98]      # a tokenizer that never adds it
    assert bos.encode(Tok(adds=True), "ab", True) == [1, 97, 98]       # one that does: still once
    assert bos.encode(Tok(adds=True), "ab", False) == [97, 98]         # false removes the tokenizer's own
    assert bos.encode(Tok(), "<s>ab", True) == [1, 97, 98]             # a chat template rendered it: not twice
    assert bos.encode(Tok(), "<s>ab", False) == [1, 97, 98]            # the template's own BOS is the prompt's
    assert bos.encode(Tok(bos_token_id=None), "ab", True) == [97, 98]


def test_tokenizer_adds_bos():
    assert bos.tokenizer_adds_bos(Tok(adds=True)) and not bos.tokenizer_adds_bos(Tok(adds=False))
    assert not bos.tokenizer_adds_bos(Tok(adds=True, bos_token_id=None))


@pytest.mark.parametrize("files, expected", [
    ({"tokenizer_config.json": {"bos_token": "<s>"}}, "<s>"),
    ({"tokenizer_config.json": {"bos_token": {"content": "<bos>", "lstrip": False}}}, "<bos>"),
    ({"tokenizer_config.json": {"bos_token": None}, "special_tokens_map.json": {"bos_token": "<|im_start|>"}},
     "<|im_start|>"),
    ({"tokenizer_config.json": {"eos_token": "</s>"}}, None), ({}, None)])
def test_folder_bos_token_reads_the_tokenizer_files(tmp_path, files, expected):
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content))
    assert bos.folder_bos_token(tmp_path) == expected


def test_check_folder_refuses_only_an_impossible_true(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": None}))
    with pytest.raises(schema.ConfigError, match="models.m.add_bos_token: true"):
        bos.check_folder("m", True, tmp_path, "models/m")
    bos.check_folder("m", "auto", tmp_path, "models/m")
    bos.check_folder("m", False, tmp_path, "models/m")


def test_recorded_reads_prepares_record_and_refuses_an_old_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    record = paths.source_dir("m") / paths.SOURCE_SPEC
    io.atomic_write_json(record, {"source": "local:x", bos.RECORD_KEY: True})
    assert bos.recorded("m") is True
    io.atomic_write_json(record, {"source": "local:x"})
    with pytest.raises(io.DataError, match="no add_bos_token .*re-run prepare@m"):
        bos.recorded("m")
