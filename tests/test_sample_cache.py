"""The per-sample cache (pipeline/evaluation/sample_cache.py): a re-run computes only the documents it
lacks, and every input that can change a sample's output changes its key."""
import json
from dataclasses import dataclass, replace
from types import SimpleNamespace

from pipeline.domain.sets import sample_row
from pipeline.domain.sets.sample_row import partial as row
from pipeline.evaluation import sample_cache
from pipeline.domain.sets.task_rows import TaskResult
from pipeline.domain.sets.tasks import TaskSpec
from pipeline.schema import Task


def fake_run(calls):
    def run(session, specs, ev):
        found, samples = {}, {}
        for s in specs:
            calls.append(list(s.docs) if s.docs is not None else s.name)
            rows = [row(doc_id=d, scores={"acc": 100.0 * (d % 2)}) for d in s.doc_ids]
            found[s.name], samples[s.name] = TaskResult({"acc": -1.0}, rows, {"acc": True}), rows
        return found, samples
    return run


def test_a_rerun_reads_a_chunk_computed_before_and_recomputes_one_in_another_composition(tmp_path):
    cache = sample_cache.SampleCache("k", root=tmp_path)
    calls, counts = [], {}
    run = sample_cache.cached(cache, {"c": "t1"}, fake_run(calls), counts)
    spec = TaskSpec("c", "classify", {}, "c", 4, {"acc": True}, pool=10, docs=(5, 1, 7, 3))
    first = run(None, [spec], None)[1]["c"]
    assert calls == [[5, 1, 7, 3]] and [r.doc_id for r in first] == [5, 1, 7, 3]
    assert run(None, [spec], None)[1]["c"] == first and len(calls) == 1          # the same chunk: read
    more = TaskSpec("c", "classify", {}, "c", 6, {"acc": True}, pool=10, docs=(5, 1, 7, 3, 9, 0))
    second = run(None, [more], None)[1]["c"]
    assert calls[1] == [5, 1, 7, 3, 9, 0] and [r.doc_id for r in second] == [5, 1, 7, 3, 9, 0]
    assert run(None, [more], None)[1]["c"] == second and len(calls) == 2
    # each kept row carries its batch composition on disk; the rows read back are plain SampleRows
    kept = [json.loads(x) for f in cache.dir.glob("*.jsonl") for x in f.read_text().splitlines()]
    assert kept and all(k.pop(sample_cache.BATCH) for k in kept)
    by_doc = {k["doc_id"]: sample_row.of(k, "kept") for k in kept}
    assert [by_doc[r.doc_id] for r in second] == second
    timed = counts.pop("tasks")
    assert counts == {"cached": 4 + 6, "computed": 4 + 6}
    assert list(timed) == ["c"] and timed["c"]["computed"] == 10 and timed["c"]["seconds"] >= 0.0
    other = sample_cache.cached(cache, {"c": "t2"}, fake_run(calls), {})      # another task key: nothing shared
    other(None, [spec], None)
    assert calls[-1] == [5, 1, 7, 3]


def composition_dependent(calls):
    """An engine whose per-sample result depends on the other documents of its batch, as batched sums
    do (padding, shared prefix, kernel blocking)."""
    def run(session, specs, ev):
        found, samples = {}, {}
        for s in specs:
            calls.append(list(s.doc_ids))
            rows = [row(doc_id=d, scores={"rougeL": d + 0.001 * sum(s.doc_ids)}) for d in s.doc_ids]
            found[s.name], samples[s.name] = TaskResult({}, rows, {"rougeL": True}), rows
        return found, samples
    return run


def test_cold_and_warm_give_identical_rows_whatever_batch_composition_the_cache_saw(tmp_path):
    """Warm: the cache filled by looks of 2 documents, then read with chunks of 4 (a raised cap);
    cold: chunks of 4 on an empty cache. Every row identical."""
    docs = (4, 2, 6, 0, 1, 3, 5, 7)
    warm_cache = sample_cache.SampleCache("k", root=tmp_path / "warm")
    calls: list = []
    warm = sample_cache.cached(warm_cache, {"g": "t"}, composition_dependent(calls), {})
    spec = lambda ds: TaskSpec("g", "generate", {}, "g", len(ds), {"rougeL": True}, pool=8, docs=ds)  # noqa: E731
    for i in range(0, 8, 2):
        warm(None, [spec(docs[i:i + 2])], None)
    warm_rows = [r for i in range(0, 8, 4) for r in warm(None, [spec(docs[i:i + 4])], None)[1]["g"]]
    cold = sample_cache.cached(sample_cache.SampleCache("k", root=tmp_path / "cold"), {"g": "t"},
                               composition_dependent([]), {})
    cold_rows = [r for i in range(0, 8, 4) for r in cold(None, [spec(docs[i:i + 4])], None)[1]["g"]]
    assert warm_rows == cold_rows


def test_the_keys_change_with_file_contents_and_task_params(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"text": "a"}) + "\n")
    yaml = tmp_path / "t.yaml"
    yaml.write_text("task: x\n")
    task = Task(kind="classify", config=str(yaml), data=str(data), labels=["a", "b"], limit=4)
    k = sample_cache.task_key(task, str(yaml), str(data))
    # the cap and the judgement choose documents, not their outputs: a raised cap reads what it has
    assert sample_cache.task_key(replace(task, limit=6, min_baseline={"acc": 50.0}), str(yaml), str(data)) == k
    assert sample_cache.task_key(replace(task, labels=["b", "a"]), str(yaml), str(data)) != k
    data.write_text(json.dumps({"text": "b"}) + "\n")
    assert sample_cache.task_key(task, str(yaml), str(data)) != k
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "model.safetensors").write_bytes(b"\x00" * 8)
    h = sample_cache.files_hash([ckpt])
    (ckpt / "model.safetensors").write_bytes(b"\x00" * 7 + b"\x01")
    assert sample_cache.files_hash([ckpt]) != h


def test_cached_tasks_score_from_their_rows_and_an_uncached_task_runs_as_it_is(tmp_path):
    cache = sample_cache.SampleCache("k", root=tmp_path)
    calls, counts = [], {}
    run = sample_cache.cached(cache, {"c": "t1"}, fake_run(calls), counts)
    local = TaskSpec("c", "classify", {}, "c", 4, {"acc": True}, pool=10, docs=(5, 1, 7, 2))
    registry = TaskSpec("r", "lm_eval", {}, "r", 3, {"acc": True})
    found, _ = run(None, [local, registry], None)
    assert calls == ["r", [5, 1, 7, 2]]
    assert found["c"].metrics == {"acc": 75.0}                 # 3 of 4 odd: from the rows, cached or not
    assert found["r"].metrics == {"acc": -1.0}                 # lm-eval's own aggregate, untouched
    assert run(None, [local], None)[0]["c"].metrics == {"acc": 75.0} and len(calls) == 2


def test_a_measure_is_computed_once_per_spec_and_says_when(tmp_path):
    cache = sample_cache.SampleCache("k", root=tmp_path)
    made = []

    def compute():
        made.append(1)
        return {"tok_s": 12.5, "rows": [1, 2]}
    assert cache.measure("throughput", {"repeats": 2}, compute) == ({"tok_s": 12.5, "rows": [1, 2]}, None)
    value, when = cache.measure("throughput", {"repeats": 2}, compute)
    assert value == {"tok_s": 12.5, "rows": [1, 2]} and when and len(made) == 1
    cache.measure("throughput", {"repeats": 3}, compute)      # another spec: measured again
    sample_cache.SampleCache("k2", root=tmp_path).measure("throughput", {"repeats": 2}, compute)
    assert len(made) == 3


def test_the_code_hash_covers_the_imported_pipeline_modules_and_no_other(tmp_path, monkeypatch):
    import sys
    import types
    fake = tmp_path / "mod.py"
    fake.write_text("x = 1\n")
    monkeypatch.setattr(sample_cache, "PACKAGE", tmp_path)      # a package of one module, imported
    monkeypatch.setitem(sys.modules, "fake_mod", types.SimpleNamespace(__file__=str(fake)))
    monkeypatch.setattr(sample_cache, "RUN_BY_PATH", ())
    one = sample_cache.code_hash()
    (tmp_path / "other.py").write_text("y = 2\n")               # in the package, not imported: no change
    assert sample_cache.code_hash() == one
    fake.write_text("x = 2\n")                                   # an imported module edited: a new key
    assert sample_cache.code_hash() != one


@dataclass
class _Cfg:
    name: str = "x"


def test_the_variant_key_tells_the_noise_stages_arithmetic_from_the_runs(tmp_path):
    from pipeline.schema import Serving
    params = SimpleNamespace(eval=SimpleNamespace(batch_size=1, seed=0), serving=Serving())
    variant = SimpleNamespace(checkpoint=str(tmp_path), serve_path=str(tmp_path), kv_cfg=_Cfg(), model_cfg=_Cfg())
    run = sample_cache.variant_key(params, variant, "reference", {"compute_dtype": "float32"})
    assert run == sample_cache.variant_key(params, variant, "reference", {"compute_dtype": "float32"})
    assert run != sample_cache.variant_key(params, variant, "reference",
                                           {"compute_dtype": "float32", "arithmetic": "bf16-operands: ..."})
    assert run != sample_cache.variant_key(params, variant, "vllm", {"compute_dtype": "float32"})


def test_a_kept_file_is_computed_once_per_spec(tmp_path):
    cache = sample_cache.SampleCache("k", root=tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    def save(f, v):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(v))

    def load(f):
        return json.loads(f.read_text())

    assert cache.kept("base", [1], ".json", compute, save, load) == {"n": 1}
    assert cache.kept("base", [1], ".json", compute, save, load) == {"n": 1} and len(calls) == 1
    assert cache.kept("base", [2], ".json", compute, save, load) == {"n": 2}       # another spec: computed


def test_measured_records_what_it_read_in_the_result(tmp_path):
    cache = sample_cache.SampleCache("k", root=tmp_path)
    first, second = {}, {}
    assert cache.measured("fidelity", [1], lambda: {"kl": 0.1}, first) == {"kl": 0.1} and "reused" not in first
    assert cache.measured("fidelity", [1], lambda: {"kl": 9.9}, second) == {"kl": 0.1}
    assert list(second["reused"]) == ["fidelity"]


def test_a_wall_budget_or_an_slo_keeps_the_key_and_a_served_flag_changes_it(tmp_path):
    from pipeline.schema import Serving, Slo, Vllm, VllmBudget
    variant = SimpleNamespace(checkpoint=str(tmp_path), serve_path=str(tmp_path), kv_cfg=_Cfg(), model_cfg=_Cfg())

    def key(serving):
        params = SimpleNamespace(eval=SimpleNamespace(batch_size=1, seed=0), serving=serving)
        return sample_cache.variant_key(params, variant, "vllm", {"compute_dtype": "bfloat16"})
    base = key(Serving(backend="vllm"))
    assert key(Serving(backend="vllm", vllm=Vllm(budget=VllmBudget(max_wall_s=300)))) == base
    assert key(Serving(backend="vllm", slo=Slo(ttft_ms=2000, tpot_ms=200))) == base
    assert key(Serving(backend="vllm", vllm=Vllm(max_model_len=4608))) != base
    assert key(Serving(backend="vllm", vllm=Vllm(num_concurrent=1))) != base
