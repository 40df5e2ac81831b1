"""Knobs that change a pick live under `decision:`, never `report:` (issue 53 item 5): decide on synthetic
results (tests/test_decide.py's project) with every `report:` key changed gives the same verdicts and
picks in decision.json; and decision.kv_kl_tolerance bars the same KV modes from page 1's pick as from
every target GPU's, saying so where it changed page 1's."""
import dataclasses
import json

from pipeline import io, schema
from pipeline.report import plots
from pipeline.schema.yaml_io import safe_dump, safe_load
from pipeline.stages import decide
from tests.test_decide import project  # noqa: F401  (the fixture)

# a valid value other than the shipped one, per report: key; a new key must be added here to pass
OTHER = {"length_buckets": [0, 150, 300], "regressions_per_task": 1, "min_speed_vs_baseline": 0.95,
         "fidelity_bootstrap": {"resamples": 200, "seed": 7}}


def decided(root) -> dict:
    """What decide decided: every row's verdicts, page 1's pick and each GPU's."""
    data = json.loads((root / "results/decision.json").read_text())
    pick = {n: r and (r["tier"], r["kv"]) for n, r in data["recommended"].items()}
    gpus = {n: {g: r and (r["tier"], r["kv"]) for g, r in per.items()} for n, per in data["per_gpu"].items()}
    verdicts = {(r["tier"], r["kv"]): (r["overall"], {k: v["verdict"] for k, v in r["verdicts"].items()})
                for r in data["rows"]}
    return {"recommended": pick, "per_gpu": gpus, "verdicts": verdicts}


def edit_params(root, edit) -> None:
    p = safe_load((root / "params.yaml").read_text())
    edit(p)
    (root / "params.yaml").write_text(safe_dump(p))


def test_every_report_key_changed_leaves_the_verdicts_and_picks_alone(project):  # noqa: F811
    assert set(OTHER) == {f.name for f in dataclasses.fields(schema.Report)}, "give each report: key another value"
    decide.main()
    before = decided(project)
    shipped = safe_load((project / "params.yaml").read_text())["report"]

    def change_all(p):
        for key, value in OTHER.items():
            assert shipped.get(key, getattr(schema.Report(), key)) != value
            p["report"][key] = value
    edit_params(project, change_all)
    assert schema.load(project / "params.yaml").report == schema.Report(
        **{**OTHER, "fidelity_bootstrap": schema.FidelityBootstrap(**OTHER["fidelity_bootstrap"])})
    decide.main()
    assert decided(project) == before
    assert before["recommended"]["m"] == ("nf4-bnb", "fp8")        # the comparison is not of empty picks


EDGES = [0, 512, 1024]


def long_record(kl: float) -> dict:
    """A long_context record of 3 texts whose per-bucket KL is `kl` give or take a little."""
    kls = [[kl + d, kl + d] for d in (0.0, 0.001, 0.002)]
    buckets = [{"lo": lo, "hi": hi, "n_texts": 3, "n_positions": 3 * (hi - lo), "reach": hi, "kl_mean": kl + 0.001, "kl_ci": [kl, kl + 0.002], "top1": 99.0,
                "top1_ci": [98.0, 100.0]} for lo, hi in zip(EDGES, EDGES[1:])]
    return {"status": "ok", "texts": 3, "positions": 1024, "edges": EDGES, "k": 20, "confidence": 0.95,
            "model_context": 1024, "buckets": buckets, "per_text": {"kl": kls, "top1": [[99.0] * 2] * 3}}


def add_long_context(root, kl_of) -> None:
    """Every ok result.json of model m gets a long_context record, its KL from kl_of(tier, kv)."""
    for res in (root / "results/evals/m").glob("*/result.json"):
        data = json.loads(res.read_text())
        if data["status"] == "ok":
            data["long_context"] = long_record(kl_of(data["tier"], data["kv"]))
            io.atomic_write_json(res, data)


def test_kv_kl_tolerance_bars_the_same_kv_modes_from_page_one_and_every_gpu(project, monkeypatch):  # noqa: F811
    monkeypatch.setattr(plots, "kl_by_position", lambda *a, **k: None)
    # nf4-bnb's fp8 cache adds 0.1 nats/token over its KV auto: not shown within 0.02; every other within it
    add_long_context(project, lambda tier, kv: 0.1 if (tier, kv) == ("nf4-bnb", "fp8") else 0.001)
    decide.main()
    found = decided(project)
    assert found["recommended"]["m"] == ("nf4-bnb", "auto")
    assert set(found["per_gpu"]["m"].values()) == {("nf4-bnb", "auto")}
    why = json.loads((project / "results/decision.json").read_text())["recommended"]["m"]["why"]
    assert "without decision.kv_kl_tolerance's bar the pick would be `nf4-bnb-fp8`" in why
    assert "`nf4-bnb-fp8` not shown non-inferior up to 4,096 tokens" in why
    # the knob is decision's: widened past 0.1, nothing is barred and both picks take the fp8 cache again
    edit_params(project, lambda p: p["decision"].update(kv_kl_tolerance=0.5))
    decide.main()
    found = decided(project)
    assert found["recommended"]["m"] == ("nf4-bnb", "fp8")
    assert set(found["per_gpu"]["m"].values()) == {("nf4-bnb", "fp8")}
    assert "kv_kl_tolerance" not in json.loads((project / "results/decision.json").read_text())["recommended"]["m"]["why"]
