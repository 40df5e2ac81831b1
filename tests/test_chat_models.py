"""A base model without a chat template and an instruct model with one, side by side from one
params.yaml: `check` passes with `auto` (and stops a `true` on the base model in one line), prepare
records each model's own answer, and both evaluate, the instruct model's prompts wrapped in its template
and the base model's not. Real stages on two tiny models (tests/tiny_model.py; model tier: ~1 minute)."""
import json
import shutil
import sys

import pytest
import yaml

from pipeline import paths
from pipeline.domain.model import chat
from pipeline.stages import baseline, check, evaluate, prepare, quantize
from tests import tiny_model
from tests.conftest import short_tasks

pytestmark = pytest.mark.model


def run(main, *args):
    sys.argv = ["stage", *args]
    main()


def write_params(tmp_path, root, base_chat="auto"):
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["models"] = {"instruct": {"source": "local:instruct-model", "dtype": "float16"},
                   "base": {"source": "local:base-model", "dtype": "float16", "apply_chat_template": base_chat}}
    p["tiers"] = {"fp16": p["tiers"]["fp16"]}
    p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
    p["calibration"].update(num_samples=2, max_seq_len=32)
    p["eval"]["tasks"] = short_tasks(p["eval"]["tasks"])
    for task in p["eval"]["tasks"].values():
        task["limit"] = 2
    p["eval"]["throughput"] = {"batch_size": 1, "new_tokens": 2, "repeats": 1}
    p["eval"].pop("fidelity")       # not this test's subject
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))


def test_a_base_and_an_instruct_model_evaluate_from_one_params_file(tmp_path, monkeypatch, root, capsys):
    for f in ("eval_sets", "recipes", "calibration"):
        shutil.copytree(root / f, tmp_path / f)
    tiny_model.build(tmp_path / "instruct-model", root)
    tiny_model.build(tmp_path / "base-model", root, chat_template=None)
    assert chat.folder_has_template(tmp_path / "instruct-model")
    assert not chat.folder_has_template(tmp_path / "base-model")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()                                 # transformers' progress bars while saving them

    write_params(tmp_path, root, base_chat=True)        # impossible: stops at check, before any model work
    with pytest.raises(SystemExit) as e:
        run(check.main)
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1
    assert "models.base.apply_chat_template: true, but base-model's tokenizer has no chat template" in err
    assert not (tmp_path / "artifacts" / "base").exists()

    write_params(tmp_path, root)
    run(check.main)
    for model in ("instruct", "base"):
        run(prepare.main, model)
        run(quantize.main, model, "fp16")
        run(baseline.main, model)                       # the baseline's row copies stage baseline's
        run(evaluate.main, model, "fp16", "auto")
    assert chat.recorded("instruct") is True and chat.recorded("base") is False
    results = {m: json.loads(paths.eval_result(m, "fp16", "auto").read_text()) for m in ("instruct", "base")}
    for model, result in results.items():
        assert result["status"] == "ok", (model, result.get("reason"))
        assert result["metrics"] and result["throughput"]["gen_tokens_per_s"] > 0
    assert results["instruct"]["chat_template"] is True and results["base"]["chat_template"] is False
    # the same documents: the instruct model's prompts carry its template's turns, the base model's do not
    for task in ("summarization", "classification"):
        rows = {m: [json.loads(line) for line in
                    (paths.eval_dir(m, "fp16", "auto") / paths.SAMPLES / f"{task}.jsonl").read_text().splitlines()]
                for m in ("instruct", "base")}
        for wrapped, plain in zip(rows["instruct"], rows["base"]):
            assert wrapped["doc_id"] == plain["doc_id"]
            assert wrapped["prompt_chars"] > plain["prompt_chars"] + len("<|im_start|>user\n"), task
