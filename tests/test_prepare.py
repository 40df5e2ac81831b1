import json
import sys
from types import SimpleNamespace

import pytest

from pipeline import paths
from pipeline.domain.model import bos, chat
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.domain.model import tokenizer_check
from pipeline.stages import prepare


class FakeTokenizer:
    def __init__(self):
        self.vocab = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
        self.eos_token, self.pad_token, self.model_max_length = "<|im_start|>", None, 10**30

    @property
    def eos_token_id(self):
        return self.vocab[self.eos_token]

    def convert_ids_to_tokens(self, i):
        return {v: k for k, v in self.vocab.items()}[i]


def test_fix_special_tokens_uses_config_eos_id():
    tok = FakeTokenizer()
    prepare.fix_special_tokens(tok, SimpleNamespace(eos_token_id=2, max_position_embeddings=8192))
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|im_end|>"
    assert tok.model_max_length == 8192


def test_fix_special_tokens_list_eos():
    tok = FakeTokenizer()
    prepare.fix_special_tokens(tok, SimpleNamespace(eos_token_id=[2, 0]))
    assert tok.eos_token == "<|im_end|>"


# The stage's record of the chat template (pipeline/domain/model/chat.py), with the conversion replaced by
# one writing only tokenizer files: no model is loaded.

class BosTokenizer:
    """What prepare asks of the tokenizer it wrote: its BOS id, and whether a plain text starts with it."""
    def __init__(self, bos_token_id=1, adds=False):
        self.bos_token_id, self.adds = bos_token_id, adds

    def __call__(self, text, add_special_tokens=True):
        return SimpleNamespace(input_ids=([self.bos_token_id] if self.adds and add_special_tokens else []) + [7])


def _project(tmp_path, monkeypatch, root, source, apply_chat_template, add_bos_token="auto", tokenizer=None,
             found=(), check_tokenizer=True):
    p = safe_load((root / "params.yaml").read_text())
    p["models"] = {"m": {"source": source, "dtype": "float16", "apply_chat_template": apply_chat_template,
                         "add_bos_token": add_bos_token, "check_tokenizer": check_tokenizer}}
    found = list(found)
    (tmp_path / "params.yaml").write_text(safe_dump(p, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["prepare", "m"])
    monkeypatch.setattr(prepare, "load_tokenizer", lambda folder: tokenizer or BosTokenizer())
    monkeypatch.setattr(prepare, "load_config", lambda folder: None)
    monkeypatch.setattr(tokenizer_check, "findings", lambda tok, cfg: found)


def _writes(files):
    def convert(_src, out, *_):
        for name, text in files.items():
            (out / name).write_text(text)
    return convert


def _hub_base(tmp_path, monkeypatch):
    """A hub: source whose download is a folder of a base model's tokenizer files."""
    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        SimpleNamespace(snapshot_download=lambda ref: str(tmp_path / "snapshot")))
    monkeypatch.setattr(prepare, "from_folder", _writes(BASE))


INSTRUCT = {"tokenizer_config.json": json.dumps({"eos_token": "<|im_end|>"}),
            "chat_template.jinja": "{{ messages[0]['content'] }}"}          # as transformers 5 saves it
BASE = {"tokenizer_config.json": json.dumps({"eos_token": "</s>"})}


@pytest.mark.parametrize("files, expected", [(INSTRUCT, True), (BASE, False)])
def test_prepare_records_auto_as_the_prepared_tokenizer_has_it(tmp_path, monkeypatch, root, files, expected):
    _project(tmp_path, monkeypatch, root, "embedded:smollm2-135m-instruct", "auto")
    monkeypatch.setattr(prepare, "embedded_gguf_path", lambda ref: tmp_path / "x.gguf")
    monkeypatch.setattr(prepare, "from_gguf", _writes(files))
    prepare.main()
    record = json.loads((paths.source_dir("m") / paths.SOURCE_SPEC).read_text())
    assert record == {"source": "embedded:smollm2-135m-instruct", "apply_chat_template": expected,
                      "add_bos_token": False, "tokenizer_check": {"findings": [], "overridden": False}}
    assert chat.recorded("m") is expected


@pytest.mark.parametrize("param, tokenizer, expected", [
    ("auto", BosTokenizer(adds=True), True), ("auto", BosTokenizer(adds=False), False),
    (True, BosTokenizer(adds=False), True), (False, BosTokenizer(adds=True), False)])
def test_prepare_records_add_bos_token_resolved_against_the_prepared_tokenizer(tmp_path, monkeypatch, root, param,
                                                                               tokenizer, expected):
    _project(tmp_path, monkeypatch, root, "embedded:smollm2-135m-instruct", "auto", param, tokenizer)
    monkeypatch.setattr(prepare, "embedded_gguf_path", lambda ref: tmp_path / "x.gguf")
    monkeypatch.setattr(prepare, "from_gguf", _writes(INSTRUCT))
    prepare.main()
    assert bos.recorded("m") is expected


def test_prepare_refuses_add_bos_true_on_a_tokenizer_without_bos_in_one_line(tmp_path, monkeypatch, root, capsys):
    _project(tmp_path, monkeypatch, root, "embedded:smollm2-135m-instruct", "auto", True, BosTokenizer(None))
    monkeypatch.setattr(prepare, "embedded_gguf_path", lambda ref: tmp_path / "x.gguf")
    monkeypatch.setattr(prepare, "from_gguf", _writes(INSTRUCT))
    with pytest.raises(SystemExit) as e:
        prepare.main()
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == ("qtier: models.m.add_bos_token: true, but "
                                               "embedded:smollm2-135m-instruct's tokenizer has no BOS token")
    assert not paths.source_dir("m").exists()


def test_prepare_refuses_true_without_a_template_in_one_line_and_writes_no_source(tmp_path, monkeypatch, root,
                                                                                   capsys):
    _project(tmp_path, monkeypatch, root, "hub:org/base", True)
    _hub_base(tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as e:
        prepare.main()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2
    assert err == "qtier: models.m.apply_chat_template: true, but hub:org/base's tokenizer has no chat template"
    assert not paths.source_dir("m").exists() and not list(paths.source_dir("m").parent.glob(".source*"))


def test_a_tokenizer_that_is_not_the_model_s_stops_prepare_in_one_line_and_writes_no_source(
        tmp_path, monkeypatch, root, capsys):
    _project(tmp_path, monkeypatch, root, "hub:org/base", "auto", found=["1.00 characters per token"])
    _hub_base(tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as e:
        prepare.main()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1
    assert err.startswith("qtier: models.m: the tokenizer of hub:org/base does not look like the model's: 1.00 ")
    assert "check_tokenizer: false" in err and not paths.source_dir("m").exists()


def test_the_override_proceeds_and_records_what_was_found(tmp_path, monkeypatch, root):
    _project(tmp_path, monkeypatch, root, "hub:org/base", "auto", found=["1.00 characters per token"],
             check_tokenizer=False)
    _hub_base(tmp_path, monkeypatch)
    prepare.main()
    record = json.loads((paths.source_dir("m") / paths.SOURCE_SPEC).read_text())
    assert record["tokenizer_check"] == {"findings": ["1.00 characters per token"], "overridden": True}
