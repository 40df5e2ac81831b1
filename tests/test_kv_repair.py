"""The KV repair's pure logic (pipeline/quant/kv_repair.py): the layer ranking, the fewest top-ranked
layers kept that meet the bound, what is recorded; the schema's refusals; the one reader of the layers
kept (pipeline/domain/result/kv_repaired.py) and the serve line that carries them. No model."""
from __future__ import annotations

import json
import itertools

import pytest

from pipeline import paths, schema
from pipeline.quant import kv_repair
from pipeline.schema import FieldError, KvMode, KvRepair

pytestmark = pytest.mark.unit


def additive(per_layer: dict[int, float]):
    """A cache whose KL is the sum of its quantized layers' KL alone (interactions aside)."""
    return lambda kept: sum(v for i, v in per_layer.items() if i not in kept)


def test_layers_rank_by_their_kl_alone_ties_by_index():
    assert kv_repair.ranked({0: 0.001, 1: 0.02, 2: 0.001, 3: 0.5}) == [3, 1, 0, 2]


@pytest.mark.parametrize("seed", range(20))
def test_the_choice_is_the_fewest_top_ranked_layers_within_the_bound(seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    # skewed: a few layers carry most of the KL (as the first and last layers often do), exact zeros too
    kl = {i: float(v) for i, v in enumerate(rng.lognormal(-6, 2, 30) * (rng.random(30) > 0.2))}
    order = kv_repair.ranked(kl)
    f, bound = additive(kl), float(sum(kl.values()) * rng.uniform(0.01, 0.9))
    found = kv_repair.choose(order, f, bound, max_candidates=30)
    fewest = next(k for k in range(31) if f(set(order[:k])) <= bound)
    assert found.chosen == fewest
    rec = kv_repair.summary(order, kl, found)
    assert rec["skip_layers"] == sorted(order[:fewest]) and rec["kept"] == fewest and rec["met_bound"]
    assert f(set(rec["skip_layers"])) <= bound
    # no set of fewer layers, top-ranked or not, meets it: on an additive cache the ranking is optimal
    if fewest:
        assert all(f(set(c)) > bound for c in itertools.combinations(order[:fewest + 3], fewest - 1))


def test_no_layer_kept_when_the_format_already_meets_the_bound_and_the_budget_bounds_the_search():
    kl = {i: 0.001 for i in range(30)}
    found = kv_repair.choose(kv_repair.ranked(kl), additive(kl), 0.05, 10)
    assert found.chosen == 0 and list(found.tried) == [0]
    assert "the format on every layer already meets" in kv_repair.summary(kv_repair.ranked(kl), kl, found)["stopped"]
    tight = kv_repair.choose(kv_repair.ranked(kl), additive(kl), 0.0055, 3)
    assert len(tight.tried) == 3 and tight.chosen == 30     # out of budget: the most measured within it
    assert "layers kept" in kv_repair.worded(tight.stopped)


def test_the_record_names_every_layer_costliest_first():
    kl = {0: 0.1, 1: 0.3, 2: 0.0}
    found = kv_repair.choose(kv_repair.ranked(kl), additive(kl), 0.15, 5)
    rec = kv_repair.summary(kv_repair.ranked(kl), kl, found)
    assert rec["ranking"] == [[1, 0.3], [0, 0.1], [2, 0.0]] and rec["skip_layers"] == [1] and rec["layers"] == 3


@pytest.mark.parametrize("mode, key", [
    (dict(cache_dtype="auto", repair=KvRepair()), "repair"),
    (dict(cache_dtype="nvfp4", skip_layers=[0], repair=KvRepair()), "skip_layers"),
    (dict(cache_dtype="fp8_e4m3", scale="calibrated", repair=KvRepair()), "repair"),
])
def test_a_repair_with_nothing_to_choose_is_refused(mode, key):
    with pytest.raises(FieldError) as e:
        KvMode(**mode)
    assert e.value.field == key


@pytest.mark.parametrize("bad", [dict(max_kl=0.0), dict(max_kl=-0.1), dict(max_candidates=1), dict(texts=0)])
def test_a_repair_bound_of_nothing_is_refused(bad):
    with pytest.raises(FieldError):
        KvRepair(**bad)


def test_evaluate_and_decide_read_the_layers_kvscales_kept(tmp_path, monkeypatch, params_dict):
    from pipeline.domain.result import kv_repaired

    monkeypatch.chdir(tmp_path)
    params_dict["kv_modes"]["nvfp4-r"] = {"cache_dtype": "nvfp4", "repair": {"max_kl": 0.01}}
    p = schema.parse(params_dict)
    model = next(iter(p.models))
    assert kv_repaired.mode(p, model, "fp16", "fp8") is p.kv_modes["fp8"]
    with pytest.raises(Exception, match="no chosen skip_layers for repaired kv mode 'nvfp4-r'"):
        kv_repaired.mode(p, model, "fp16", "nvfp4-r")
    where = tmp_path / paths.kvrepair_records(model, "fp16")
    where.mkdir(parents=True)
    (where / "nvfp4-r.json").write_text(json.dumps({"repair": {"skip_layers": [0, 29]}}))
    served = kv_repaired.params_for(p, model, "fp16", "nvfp4-r").kv_modes["nvfp4-r"]
    assert served.skip_layers == [0, 29] and served.cache_dtype == "nvfp4" and served.repair is None
    assert p.kv_modes["nvfp4-r"].skip_layers == []


def test_the_serve_line_carries_the_layers_kept():
    from pipeline.domain.hardware import serve_line

    args = serve_line.vllm_serve_args("ckpt", "float16", "nvfp4", {"kv_cache_dtype_skip_layers": [0, 29]})
    assert args[-3:] == ["--kv-cache-dtype-skip-layers", "0", "29"]
    assert "--kv-cache-dtype-skip-layers" not in serve_line.vllm_serve_args("ckpt", "float16", "nvfp4",
                                                                           {"kv_cache_dtype_skip_layers": []})


def test_the_recommended_serve_line_of_a_repaired_mode_keeps_its_layers():
    from pipeline.report import commands
    from pipeline.scoring.verdict.rows import Evidence, Judgement, Row
    from tests import result_files

    def line(**own):
        m = result_files.measured("fp16", "nvfp4-r", backend="reference", serve_path="/ckpt", **own)
        return commands.serve_command(Row(m, Evidence(), Judgement("pass")), "bfloat16", "nvfp4")

    assert line(kv_skip_layers=(0, 5)).endswith("--kv-cache-dtype nvfp4 --kv-cache-dtype-skip-layers 0 5")
    assert "skip-layers" not in line()
