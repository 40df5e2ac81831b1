"""Published checkpoints on real (tiny) folders: quantize refuses one that is not the model's, with one
line, before any evaluation (model tier: builds tiny models and loads their tokenizers)."""
import json
import shutil

import pytest

from pipeline import io
from pipeline.quant.oneshot import published_tier
from pipeline.schema import Tier
from tests import tiny_model

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def source(tmp_path_factory, request):
    return tiny_model.build(tmp_path_factory.mktemp("src") / "tiny", request.config.rootpath)


def tier(folder):
    return Tier(method="published", checkpoint=f"local:{folder}", hardware="int8-w8a8")


def test_the_model_itself_passes_and_is_recorded_as_its_config_says(source, tmp_path):
    info = published_tier(tier(source), "tiers.pub", source, tmp_path / "out")
    assert info["scheme"] == "unquantized float32" and info["published"]["serve_name"] == str(source)
    assert json.loads((tmp_path / "out" / "qtier_published.json").read_text())["path"] == str(source)


def test_another_architecture_is_refused_naming_what_differs(source, tmp_path, request):
    other = tiny_model.build(tmp_path / "wide", request.config.rootpath, hidden=128)
    with pytest.raises(io.DataError, match=r"^tiers\.pub\.checkpoint: not this model's architecture: "
                                           r"hidden_size 64 vs 128; intermediate_size 128 vs 256$"):
        published_tier(tier(other), "tiers.pub", source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_another_tokenizer_is_refused(source, tmp_path):
    other = tmp_path / "retok"
    shutil.copytree(source, other)
    cfg = json.loads((other / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{{ messages[0]['content'] }}"
    (other / "tokenizer_config.json").write_text(json.dumps(cfg))
    for f in other.glob("chat_template.*"):
        f.unlink()
    with pytest.raises(io.DataError, match=r"^tiers\.pub\.checkpoint: its tokenizer is not the model's: "
                                           r"chat template differs$"):
        published_tier(tier(other), "tiers.pub", source, tmp_path / "out")


def test_an_unreadable_quantization_config_is_refused(source, tmp_path):
    other = tmp_path / "exl2"
    shutil.copytree(source, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "exl2", "bits": 4}
    (other / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(io.DataError, match=r"^tiers\.pub\.checkpoint: quantization_config\.quant_method 'exl2' "
                                           r"is not one of"):
        published_tier(tier(other), "tiers.pub", source, tmp_path / "out")
