"""pipeline/report/repaired.py and repair.uniform_of: a repaired tier is read beside its uniform tier,
with what its search promoted, its effective bits, weights and verdict."""
import dataclasses

from pipeline.quant import repair
from pipeline.report import markdown, repaired
from pipeline.schema import Repair, Tier
from pipeline.scoring.verdict.rows import Evidence
from pipeline.scoring.estimators.stats import Interval
from tests.test_report import HEADER, facts, judged, model_report

RECORD = {"groups": 4, "promoted": ["model.layers.1.mlp.gate_proj+up_proj"], "promote_bits": 8,
          "effective_bits": 5.71, "met_bound": True, "stopped": "bisection converged: 1 groups meet the bound, 0 do not",
          "proxy": {"kind": "RTN", "texts": 8, "positions": 1024, "bound": 0.01,
                    "tried": {"0": 0.0812, "4": 0.0031, "1": 0.0094}},
          "seconds": 41.0, "promoted_modules": ["model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj"],
          "sensitivity": {"model.layers.1.mlp.gate_proj+up_proj": 0.5}}


def tier(**kw):
    return Tier(**{"method": "gptq", "recipe": "recipes/gptq_w4a16.yaml", "weight_bits": 4, "group_size": "auto",
                   "hardware": "int4-w4a16", **kw})


def test_uniform_of_finds_the_same_quantization_without_repair():
    tiers = {"fp16": Tier(method="baseline"), "int4": tier(), "int4-g32": tier(group_size=32),
             "int4-fixed": tier(repair=Repair()), "awq-fixed": tier(method="awq", recipe="recipes/awq_w4a16.yaml",
                                                                     repair=Repair())}
    assert repair.uniform_of(tiers) == {"int4-fixed": "int4", "awq-fixed": None}


def test_the_section_shows_the_repaired_row_beside_the_uniform_one():
    found = [facts("fp16", "auto", metrics={"classification/acc": 90.0}, weight_bytes=2**20 * 256),
             facts("int4", "auto", metrics={"classification/acc": 70.0}, weight_bytes=2**20 * 108),
             facts("int4-fixed", "auto", metrics={"classification/acc": 89.5}, weight_bytes=2**20 * 121,
                   repair=RECORD)]
    ev = [None, Evidence({"classification/acc": -20.0}, {"classification/acc": Interval(-20.0, -24.0, -16.0, 320)}, {}),
          Evidence({"classification/acc": -0.5}, {"classification/acc": Interval(-0.5, -1.5, 0.5, 1280)}, {})]
    m = dataclasses.replace(model_report(judged(found, ev)), repaired={"int4-fixed": "int4"})
    lines = repaired.repaired_lines(m)
    row = next(x for x in lines if x.startswith("| int4-fixed-auto"))
    assert "| pass |" in row and "1 of 4 at 8 bits | 5.71 | 121.0 |" in row
    assert "0.0812 -> 0.0094 (0.01)" in row and "3 candidates; bisection converged" in row
    assert next(x for x in lines if x.startswith("| int4-auto")).startswith("| int4-auto | **FAIL** | none (uniform)")
    assert "`int4-fixed` promotes: 1.gate_up (layer.group; 8 selection texts, 1,024 tokens; search 41 s)." in lines
    assert "### Repaired tiers (mixed precision)" in markdown.details(m, HEADER)
    assert repaired.repaired_lines(dataclasses.replace(m, repaired={})) == []


def test_short_names_of_groups():
    assert repaired.short("model.layers.12.self_attn.q_proj+k_proj+v_proj") == "12.qkv"
    assert repaired.short("model.layers.0.mlp.down_proj") == "0.down"
    assert repaired.short("transformer.h.0.attn.c_attn") == "transformer.h.0.attn.c_attn"
