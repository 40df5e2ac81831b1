"""models.<name>.apply_chat_template: resolved against the tokenizer's files (pipeline/domain/model/chat.py),
recorded by prepare, read back by every variant; the old global eval.apply_chat_template is refused
with where it went. Fast: JSON and template files in tmp_path, no tokenizer or model loaded."""
import copy
import json

import pytest

from pipeline import io, paths, schema
from pipeline.domain.model import chat
from pipeline.domain.result import serving_record

TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def folder(tmp_path, config=None, jinja=None, named=None, processor=False):
    """A model folder with only the tokenizer files under test (no weights)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (tmp_path / chat.TOKENIZER_CONFIG).write_text(json.dumps(config))
    if jinja is not None:
        (tmp_path / chat.TEMPLATE_FILE).write_text(jinja)
    for name, text in (named or {}).items():
        (tmp_path / chat.TEMPLATE_DIR).mkdir(exist_ok=True)
        (tmp_path / chat.TEMPLATE_DIR / f"{name}.jinja").write_text(text)
    if processor:
        (tmp_path / chat.PROCESSOR_TEMPLATE).write_text(json.dumps({"chat_template": TEMPLATE}))
    return tmp_path


@pytest.mark.parametrize("config, jinja, named, expected", [
    ({"chat_template": TEMPLATE}, None, None, True),                  # transformers 4.x: in the config
    ({"eos_token": "</s>"}, TEMPLATE, None, True),                    # transformers 5: chat_template.jinja
    ({"eos_token": "</s>"}, None, None, False),                       # a base model
    (None, None, None, False),                                        # no tokenizer_config.json at all
    ({"chat_template": ""}, None, None, False),
    ({"chat_template": TEMPLATE}, "  \n", None, False),               # a file replaces the config's entry
    ({}, None, {"default": TEMPLATE, "tool_use": TEMPLATE}, True),
    ({"chat_template": TEMPLATE}, None, {"tool_use": TEMPLATE}, False),   # several, none the default
    ({"chat_template": [{"name": "default", "template": TEMPLATE}, {"name": "rag", "template": "x"}]}, None, None, True),
    ({"chat_template": [{"name": "rag", "template": TEMPLATE}]}, None, None, False),
])
def test_has_template_as_transformers_loads_it(config, jinja, named, expected):
    assert chat.has_template(config, jinja, named) is expected


@pytest.mark.parametrize("param, has, expected", [
    ("auto", True, True), ("auto", False, False),
    (True, True, True), (False, True, False), (False, False, False),
])
def test_resolve(param, has, expected):
    assert chat.resolve("m", param, has, "models/m") is expected


def test_true_without_a_template_is_one_line_naming_the_key_and_folder():
    with pytest.raises(schema.ConfigError) as e:
        chat.resolve("base", True, False, "models/base")
    assert str(e.value) == "models.base.apply_chat_template: true, but models/base's tokenizer has no chat template"


def test_resolve_folder_reads_the_config_and_the_jinja_file(tmp_path):
    assert chat.resolve_folder("m", "auto", folder(tmp_path / "a", {"chat_template": TEMPLATE}), "a") is True
    assert chat.resolve_folder("m", "auto", folder(tmp_path / "b", {}, jinja=TEMPLATE), "b") is True
    assert chat.resolve_folder("m", "auto", folder(tmp_path / "c", {}, named={"default": TEMPLATE}), "c") is True
    assert chat.resolve_folder("m", "auto", folder(tmp_path / "d", {"bos_token": "<s>"}), "d") is False
    assert chat.resolve_folder("m", False, folder(tmp_path / "e", {"chat_template": TEMPLATE}), "e") is False
    with pytest.raises(schema.ConfigError, match=r"^models\.m\.apply_chat_template: true, but d's tokenizer"):
        chat.resolve_folder("m", True, tmp_path / "d", "d")


def test_a_processors_template_file_is_named_when_true_is_refused(tmp_path):
    base = folder(tmp_path / "p", {"bos_token": "<s>"}, processor=True)
    assert chat.resolve_folder("m", "auto", base, "p") is False      # AutoTokenizer does not read it
    with pytest.raises(schema.ConfigError) as e:
        chat.resolve_folder("m", True, base, "p")
    assert "chat_template.json is a processor's" in str(e.value) and "\n" not in str(e.value)


def test_a_tokenizer_config_that_is_not_json_names_the_file(tmp_path):
    (tmp_path / chat.TOKENIZER_CONFIG).write_text("{not json")
    with pytest.raises(io.DataError, match=r"tokenizer_config\.json: not valid JSON"):
        chat.folder_has_template(tmp_path)


def test_recorded_reads_prepares_record_and_refuses_an_older_one(tmp_path):
    io.atomic_write_json(tmp_path / paths.SOURCE_SPEC, {"source": "local:x", chat.RECORD_KEY: False})
    assert chat.recorded("m", tmp_path) is False
    io.atomic_write_json(tmp_path / paths.SOURCE_SPEC, {"source": "local:x"})
    with pytest.raises(io.DataError, match=r"no apply_chat_template \(prepared by an older qtier\): re-run prepare@m"):
        chat.recorded("m", tmp_path)
    with pytest.raises(io.DataError, match="stage prepare@m writes it"):
        chat.recorded("m", tmp_path / "nothing")


def test_the_param_defaults_to_auto_and_takes_only_auto_true_false(params_dict):
    assert schema.Model(source="x").apply_chat_template == "auto"
    assert schema.parse(params_dict).models["smollm2-135m"].apply_chat_template == "auto"
    p = copy.deepcopy(params_dict)
    p["models"]["smollm2-135m"]["apply_chat_template"] = False
    assert schema.parse(p).models["smollm2-135m"].apply_chat_template is False
    p["models"]["smollm2-135m"]["apply_chat_template"] = "yes"
    with pytest.raises(schema.ConfigError, match=r"^models\.smollm2-135m\.apply_chat_template: expected "):
        schema.parse(p)


def test_the_global_key_is_refused_with_where_it_moved(params_dict):
    p = copy.deepcopy(params_dict)
    p["eval"]["apply_chat_template"] = True
    with pytest.raises(schema.ConfigError) as e:
        schema.parse(p)
    assert str(e.value).startswith("eval.apply_chat_template: moved to models.<name>.apply_chat_template")
    assert "\n" not in str(e.value)
    assert not hasattr(schema.parse(params_dict).eval, "apply_chat_template")


def test_a_variant_takes_the_recorded_value_not_the_param(params_dict, tmp_path, monkeypatch):
    from pipeline.engines.base import Variant

    monkeypatch.chdir(tmp_path)
    p = copy.deepcopy(params_dict)
    p["models"]["smollm2-135m"]["apply_chat_template"] = "auto"
    params = schema.parse(p)
    record = {"status": "ok", "serve_path": str(tmp_path), "storage_dtype": "float16"}
    for value in (True, False):
        io.atomic_write_json(paths.source_dir("smollm2-135m") / paths.SOURCE_SPEC,
                             {"source": "embedded:smollm2-135m-instruct", chat.RECORD_KEY: value,
                              "add_bos_token": False})
        v = Variant.of(params, "smollm2-135m", "fp16", "auto", tmp_path, serving_record.parse(record, "record"))
        assert v.chat is value and v.model_cfg.apply_chat_template is value
    unresolved = schema.Model(source="x", dtype="float16")
    with pytest.raises(ValueError, match="apply_chat_template is still auto"):
        Variant("m", "t", "k", tmp_path, unresolved, params.tiers["fp16"], params.kv_modes["auto"], tmp_path)
