"""An endpoint tier as the pick, through the real pipeline (e2e: DVC on the tiny model, a few minutes):
a fake OpenAI-compatible server (tests/fake_openai.py Replay) answers every generation prompt with the
output the reference baseline gave for that document, so the endpoint's verdicts pass against the
baseline on merit and decide recommends it: its `# already served` line on page 1 and under every
target GPU. (The tiny random model's answers at these prompts are empty, so the test also checks that
the endpoint's outputs are the baseline's document by document and no task prompt went unmatched.)
About 2 minutes on 2 cores. The task set is generation-only: the fake serves no prompt log-probs (as llama.cpp), so a
log-likelihood task would be refused, not passed. The noise stage is off (eval.noise_floor: false): the
baseline's second arithmetic gives other answers than the ones the fake replays, so page 1 says the
verdicts rest on one arithmetic.

    .venv/bin/python -m pytest -n 0 -m e2e tests/test_endpoint_pick_e2e.py
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.io import read_jsonl
from tests import tiny_model
from tests.fake_openai import Replay
from tests.test_pipeline_e2e import init_project, md_table, run, small_params

pytestmark = pytest.mark.e2e

SERVED = "tiny-served"


@pytest.fixture(scope="module")
def project(tmp_path_factory, request):
    from transformers import AutoTokenizer

    root = Path(request.config.rootpath)
    proj = tmp_path_factory.mktemp("endpoint-pick")
    model = tiny_model.build(proj / "tiny-model", root)
    tok = AutoTokenizer.from_pretrained(model)
    fake = Replay(lambda ids: tok.decode(ids, skip_special_tokens=True))
    try:
        p = small_params(root, {"tiny": {"source": "local:tiny-model", "dtype": "float16"}})
        p["eval"]["tasks"] = {n: t for n, t in p["eval"]["tasks"].items() if n != "classification"}
        p["eval"].pop("long_context", None)
        p["eval"]["noise_floor"] = False
        # the tiny random model scores near zero: a floor above it would make every verdict inconclusive
        p["decision"]["min_baseline"] = {m: 0.0 for m in p["decision"]["min_baseline"]}
        # identical answers on 8 items still read about +-41 points (the graded interval's floor: no change
        # seen in 8 pairs does not rule out a rare large one), so the margin is wide enough for them to pass
        p["decision"]["tolerances"] = {m: {"abs": 60.0} for m in p["decision"]["tolerances"]}
        for task in p["eval"]["tasks"].values():
            task["limit"] = 8
        p["tiers"] = {"fp16": p["tiers"]["fp16"],
                      "served": {"method": "endpoint", "base_url": fake.url, "served_model": SERVED,
                                 "hardware": "fp16", "label": "the baseline's answers, served"}}
        p["kv_modes"] = {"auto": p["kv_modes"]["auto"]}
        init_project(proj, root, p)
        first = run(["dvc", "repro", "baseline@tiny"], proj)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        samples = sorted((proj / "results/baseline/tiny/samples").glob("*.jsonl"))
        assert {f.stem for f in samples} == {"translation", "summarization"}, samples
        for f in samples:
            fake.answer(read_jsonl(f))
        r = run(["dvc", "repro"], proj)
        if r.returncode != 0 and (proj / "logs/decide.log").is_file():
            print((proj / "logs/decide.log").read_text()[-3000:])       # decide's traceback, for the failure
        yield proj, fake, r
    finally:
        fake.close()


def test_the_endpoint_replays_the_baseline_and_passes(project):
    proj, fake, r = project
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((proj / "results/evals/tiny/served-auto/result.json").read_text())
    assert res["status"] == "ok" and res["backend"] == "endpoint", res.get("reason")
    assert not res.get("refused"), res["refused"]
    base = {f.stem: read_jsonl(f) for f in (proj / "results/baseline/tiny/samples").glob("*.jsonl")}
    for task, rows in base.items():       # the fake's answers are the baseline's, document by document
        served = read_jsonl(proj / f"results/evals/tiny/served-auto/samples/{task}.jsonl")
        mine = {x["doc_id"]: x["output"] for x in served}
        assert mine == {x["doc_id"]: x["output"] for x in rows if x["doc_id"] in mine} and mine, task
    row = next(x for x in json.loads((proj / "results/decision.json").read_text())["rows"] if x["tier"] == "served")
    assert row["overall"] == "pass", row
    assert not [t for t in fake.unmatched if "Translate" in t or "Summarize" in t], fake.unmatched


def test_decision_md_recommends_it_as_already_served_on_page_one_and_every_gpu(project):
    proj, fake, r = project
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    md = (proj / "results/decision.md").read_text()
    line = f"# already served: {SERVED} at {fake.url}"
    page = md.split("\n## ", 1)[0]
    assert "**Recommended: `served` with KV cache `auto`**" in page, page
    assert f"Serve: `{line}`" in page, page
    # its verdicts were read in the run's arithmetic alone (stage noise off): page 1's caveat says so
    assert "rest on the run's arithmetic alone" in " ".join(page.split()), page
    gpus = list(yaml.safe_load((proj / "params.yaml").read_text())["memory"]["target_gpus"])
    per_gpu = md_table(md, "| Target GPU")
    assert [c[0] for c in per_gpu] == gpus, per_gpu
    for cells in per_gpu:       # the pick, where the sequence stopped (nothing after it: –), its line
        assert cells[1:] == ["`served` + KV `auto`", "–", f"`{line}`"], cells
