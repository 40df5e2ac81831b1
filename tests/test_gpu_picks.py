"""Page 1's per-GPU picks (pipeline/report/gpu_picks.py): the weight tier and KV format each target GPU
gets, the KV capacity that buys against the baseline's, its cost in quality and, for a quantized KV
format, by input length. Runs stage decide on tests/test_decide.py's synthetic project.

    .venv/bin/python -m pytest -n 0 -q tests/test_gpu_picks.py
"""
import json
import re

from pipeline.report import plots
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import decide
from tests.test_decide import project, samples  # noqa: F401  (the fixture)
from tests.test_report_knobs import add_long_context


def test_page_one_names_each_gpus_pick_its_capacity_its_cost_and_its_kv_by_length(project, monkeypatch):  # noqa: F811
    monkeypatch.setattr(plots, "kl_by_position", lambda *a, **k: None)
    add_long_context(project, lambda tier, kv: 0.011 if kv == "fp8" else 0.001)
    p = safe_load((project / "params.yaml").read_text())
    p["decision"]["kv_kl_tolerance"] = 0.5
    (project / "params.yaml").write_text(safe_dump(p))
    decide.main()
    md = (project / "results/decision.md").read_text()
    data = json.loads((project / "results/decision.json").read_text())
    page1 = " ".join(md.split("\n## ", 1)[0].split())
    line = re.search(r"Per GPU: (.*?\.)(?: [A-Z]|$)", page1).group(1)
    picks = {(g["tier"], g["kv"]) for g in data["per_gpu"]["m"].values()}
    assert len(picks) == 1
    tier, kv = picks.pop()
    assert line.startswith(f"`{tier}` + KV `{kv}` on A100-80G, H100-80G (")
    # the capacity is the memory plan's, against the baseline's on the same GPU
    plans = {r["tier"] + "-" + r["kv"]: r["plans"] for r in data["rows"]}
    mine, base = plans[f"{tier}-{kv}"]["L4-24G"], plans["fp16-auto"]["L4-24G"]
    assert f"{mine['kv_tokens'] / 1e6:,.2f} M KV tokens" in line
    assert f"{mine['kv_tokens'] / base['kv_tokens']:.2f}x the baseline's" in line
    assert "classification Accuracy" in line.split("; quality vs baseline: ", 1)[1]
    if kv != "auto":
        assert f"by input length: {kv} KV on" in line and "largest KL increase" in line
