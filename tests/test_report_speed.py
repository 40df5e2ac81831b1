"""What was timed lives in speed.md (pipeline/report/speed.py), so decision.md is the same for two runs of
one commit; and the digest page 1 names is of dvc.lock's sources, not its timed outputs."""
import dataclasses

import yaml

from pipeline.domain.result.facts import Serving
from pipeline.report import markdown, speed
from pipeline.scoring.verdict.rows import Row
from pipeline.stages import decide
from tests import result_files
from tests.test_report import HEADER, model_report, vllm_rows
from tests.test_report_looks import report as looked_report


def timed_otherwise(value, k: float):
    """Every number in a timing record scaled by k (nested dicts and lists followed)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value * k
    if isinstance(value, dict):
        return {key: timed_otherwise(v, k) for key, v in value.items()}
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{x.name: timed_otherwise(getattr(value, x.name), k)
                                             for x in dataclasses.fields(value)})
    if isinstance(value, (list, tuple)):
        return type(value)(timed_otherwise(v, k) for v in value)
    return value


def rerun(r: Row, k: float) -> Row:
    f = r.facts
    serving = f.serving
    if serving is not None and serving.startup_s is not None:
        serving = dataclasses.replace(serving, startup_s=serving.startup_s * k)
    return dataclasses.replace(r, facts=result_files.replaced(
        f, seconds=timed_otherwise(f.seconds, k), sample_cache=timed_otherwise(f.result.sample_cache, k),
        phases=timed_otherwise(f.phases, k), throughput=timed_otherwise(f.throughput, k), serving=serving))


def test_two_runs_that_differ_only_in_their_timings_give_one_decision_md_but_for_its_time_stamp():
    for m in (model_report(vllm_rows()), looked_report()):
        m = dataclasses.replace(m, rows=[dataclasses.replace(r, facts=result_files.replaced(
            r.facts, serving=dataclasses.replace(r.facts.serving or Serving("vllm", "cpu"), startup_s=31.0)))
            for r in m.rows])
        again = dataclasses.replace(m, rows=[rerun(r, 1.37) for r in m.rows])
        one = markdown.render({"m": m}, HEADER).splitlines()
        two = markdown.render({"m": again}, dataclasses.replace(HEADER, generated="later")).splitlines()
        assert len(one) == len(two)
        assert [(a, b) for a, b in zip(one, two) if a != b] == [
            (a, a.replace("now", "later")) for a in one if a.startswith("Generated now")]
        # the timings went to speed.md, which does change
        assert speed.render({"m": m}, HEADER) != speed.render({"m": again}, HEADER)


def lock(tmp_path, outs_md5: str, source_md5: str):
    stages = {"baseline": {"cmd": "python -m b", "deps": [{"path": "pipeline/x.py", "md5": source_md5}],
                           "outs": [{"path": "results/baseline", "md5": outs_md5}]},
              "evaluate": {"cmd": "python -m e", "params": {"params.yaml": {"eval": 1}},
                           "deps": [{"path": "results/baseline", "md5": outs_md5}],
                           "outs": [{"path": "results/timings/e.json", "md5": outs_md5}]}}
    path = tmp_path / "dvc.lock"
    path.write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    return path


def test_the_lock_digest_reads_the_sources_and_not_the_timed_outputs(tmp_path, monkeypatch):
    digest = {}
    for outs, source in (("a1", "s1"), ("b2", "s1"), ("a1", "s2")):
        monkeypatch.setattr(decide.paths, "DVC_LOCK", lock(tmp_path, outs, source))
        digest[outs, source] = decide.lock_digest()
    assert digest["a1", "s1"] == digest["b2", "s1"] != digest["a1", "s2"]
    # decide's own entry, written after decide ran (absent on a first run), changes nothing
    path = lock(tmp_path, "a1", "s1")
    data = yaml.safe_load(path.read_text())
    data["stages"]["decide"] = {"cmd": "python -m d", "deps": [{"path": "pipeline/d.py", "md5": "d1"}]}
    path.write_text(yaml.safe_dump(data))
    assert decide.lock_digest() == digest["a1", "s1"]
    monkeypatch.setattr(decide.paths, "DVC_LOCK", tmp_path / "none.lock")
    assert decide.lock_digest() == "no dvc.lock"
