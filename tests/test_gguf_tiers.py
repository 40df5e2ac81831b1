"""GGUF tiers (`method: gguf`, pipeline/schema/gguf.py) without llama.cpp: the schema's refusals, the
memory bill read from a tensor table, the server's command line, the check of llama-cpp-python's echoed
log-probs on its real answers (recorded from llama-cpp-python 0.3.36 serving the embedded SmolLM2 Q4_1),
and the tier's spec and page-1 line. The real server: tests/test_llama_cpp_e2e.py."""
import pytest

from pipeline import paths
from pipeline.domain.model import gguf_bill
from pipeline.engines.llama_cpp import backend as llama
from pipeline.engines.llama_cpp.argv import server_argv
from pipeline.report import commands
from pipeline.schema import FieldError, Tier
from pipeline.scoring.verdict.rows import Evidence, Judgement, Row
from pipeline.stages import check
from tests import result_files

Q8 = {"method": "gguf", "gguf_type": "Q8_0", "hardware": "fp16"}


def test_a_gguf_tier_names_one_known_type_or_a_file():
    assert Tier(**Q8).gguf_type == "Q8_0"
    assert Tier(method="gguf", gguf_file="embedded", hardware="fp16").gguf_file == "embedded"
    for kw, key, says in [({"gguf_type": "Q4_KM"}, "gguf_type", "did you mean 'Q4_K_M'"),
                          ({"gguf_type": "IQ4_XS"}, "gguf_type", "llama-imatrix"),
                          ({"gguf_type": None}, "gguf_type", "exactly one of"),
                          ({"gguf_file": "embedded"}, "gguf_type", "exactly one of"),
                          ({"gguf_type": None, "gguf_file": "m.bin"}, "gguf_file", ".gguf"),
                          ({"weight_bits": 8}, "weight_bits", "gguf_type's")]:
        with pytest.raises(FieldError, match=says) as e:
            Tier(**{**Q8, **kw})
        assert e.value.field == key
    with pytest.raises(FieldError, match="only a tier with method 'gguf'") as e:
        Tier(method="bnb-int8", hardware="bitsandbytes", gguf_type="Q8_0")
    assert e.value.field == "gguf_type"


def test_the_bill_sums_bytes_and_weights_per_type_with_their_scales():
    # a Q4_K block: 256 weights in 144 bytes; Q8_0: 32 in 34; F32 norms
    found = gguf_bill.bill([("Q4_K", 256 * 4, 144 * 4), ("Q8_0", 32 * 10, 34 * 10), ("Q4_K", 256, 144),
                            ("F32", 64, 256)])
    assert found["weight_bytes"] == 144 * 5 + 340 + 256 and found["weights"] == 256 * 5 + 320 + 64
    assert found["by_type"]["Q4_K"] == {"tensors": 2, "weights": 1280, "bytes": 720, "bits_per_weight": 4.5}
    assert found["by_type"]["Q8_0"]["bits_per_weight"] == 8.5 and found["by_type"]["F32"]["bits_per_weight"] == 32.0
    assert list(found["by_type"]) == ["Q4_K", "Q8_0", "F32"]        # largest first
    assert gguf_bill.bill([]) == {"weight_bytes": 0, "weights": 0, "by_type": {}}


def test_the_server_listens_on_loopback_with_the_context_and_prompt_logits():
    argv = server_argv(paths.LLAMA_PYTHON, paths.ARTIFACTS / "m.gguf", "m-q8-auto", 8123, 2048)
    assert argv[:3] == [str(paths.LLAMA_PYTHON), "-m", "llama_cpp.server"]
    pairs = dict(zip(argv[3::2], argv[4::2]))
    assert pairs == {"--model": "artifacts/m.gguf", "--model_alias": "m-q8-auto", "--host": "127.0.0.1",
                     "--port": "8123", "--n_ctx": "2048", "--logits_all": "true"}


def answer(tokens, text, logprobs=True):
    lp = {"tokens": tokens, "token_logprobs": [None] + [-1.0] * (len(tokens) - 1)} if logprobs else None
    return {"choices": [{"text": text, "logprobs": lp}], "usage": {"prompt_tokens": 6, "completion_tokens": 1}}


def test_echoed_logprobs_are_aligned_only_when_the_answer_spells_prompt_and_completion():
    prompt = llama.PROMPT
    words = prompt.replace(" ", "\0 ").split("\0")
    assert "".join(words) == prompt
    # no BOS (SmolLM2's GGUF): the tokens spell the prompt alone, the generated token missing
    assert not llama.echo_aligned(answer(words, prompt + " The"))
    # a leading BOS dropped: the generated token is among them
    assert llama.echo_aligned(answer(words + [" The"], prompt + " The"))
    assert not llama.echo_aligned(answer(words, prompt))             # an empty answer proves nothing
    assert not llama.echo_aligned(answer([], prompt + " The", logprobs=False))
    assert not llama.echo_aligned({})


def test_a_gguf_tiers_spec_is_its_type_or_file_and_page_one_shows_its_server_line(tmp_path):
    assert check.tier_spec(Tier(**Q8), tmp_path) == b"# gguf Q8_0\n"
    assert check.tier_spec(Tier(method="gguf", gguf_file="embedded", hardware="fp16"), tmp_path) == b"# gguf embedded\n"
    line = "python -m llama_cpp.server --model artifacts/m/tiers/q8/model.Q8_0.gguf --n_ctx 2048"
    served = result_files.measured("q8", backend="endpoint", serving={
        "command": line, "served_model": "m-q8-auto", "base_url": "http://127.0.0.1:1"}, hardware="fp16")
    assert commands.serve_command(Row(served, Evidence(), Judgement("pass")), "float16", "auto") == line
    elsewhere = result_files.measured("ep", backend="endpoint", serving={"served_model": "m", "base_url": "http://h:1"},
                                      hardware="fp16")
    assert commands.serve_command(Row(elsewhere, Evidence(), Judgement("pass")), "float16", "auto") == \
        "# already served: m at http://h:1"


def test_check_refuses_a_gguf_tier_without_llama_cpp_or_its_file(tmp_path):
    from pipeline import config
    from pipeline.schema import ConfigError

    with pytest.raises(ConfigError, match=r"^tiers\.q8\.method: gguf needs llama\.cpp's server .*--llama-cpp$"):
        config.check_gguf_tier("q8", Tier(**Q8), tmp_path)
    (tmp_path / paths.LLAMA_PYTHON).parent.mkdir(parents=True)
    (tmp_path / paths.LLAMA_PYTHON).write_text("")
    config.check_gguf_tier("q8", Tier(**Q8), tmp_path)
    mine = Tier(method="gguf", gguf_file="models/m.Q5_K_M.gguf", hardware="fp16")
    with pytest.raises(ConfigError, match=r"^tiers\.m\.gguf_file: file not found: models/m\.Q5_K_M\.gguf$"):
        config.check_gguf_tier("m", mine, tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models/m.Q5_K_M.gguf").write_bytes(b"GGUF")
    config.check_gguf_tier("m", mine, tmp_path)


@pytest.mark.model
def test_the_embedded_file_is_served_as_it_is_with_its_bill(tmp_path):
    from pipeline.domain.model.sources import embedded_gguf_path
    from pipeline.quant import gguf_tier

    tier = Tier(method="gguf", gguf_file="embedded", hardware="int4-w4a16")
    info = gguf_tier.quantize(tier, "embedded:smollm2-135m-instruct", tmp_path / "src", tmp_path / "q4-1")
    ref = info["gguf"]
    assert ref["path"] == str(embedded_gguf_path("smollm2-135m-instruct").resolve())
    assert ref["file_type"] == "Q4_1" and info["scheme"] == "GGUF Q4_1: published file embedded"
    bill = ref["bill"]
    assert bill["weight_bytes"] == sum(r["bytes"] for r in bill["by_type"].values())
    assert bill["by_type"]["Q4_1"]["bits_per_weight"] == 5.0         # 32 weights: 16 bytes + f16 scale and min
    assert bill["weights"] == 134515008                               # SmolLM2-135M, its tied embedding once
    assert (tmp_path / "q4-1" / paths.GGUF_REF).is_file()
    with pytest.raises(gguf_tier.GgufUnavailable, match="this model's source is local:m"):
        gguf_tier.quantize(tier, "local:m", tmp_path / "src", tmp_path / "other")
