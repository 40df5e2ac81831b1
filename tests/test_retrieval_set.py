"""scripts/retrieval_set.py: the retrieval suite written per length, the same for a seed, and the
params entries it prints are tasks that build (a word counter stands in for the tokenizer)."""
import pytest
import yaml

from pipeline.domain.sets import probe_sets, tasks
from pipeline.io import read_jsonl
from pipeline.schema import Task
from scripts import retrieval_set


def words(text):
    return len(text.split())


def test_one_file_per_length_the_same_for_a_seed(tmp_path):
    a = retrieval_set.write_sets(words, [64, 128], [0.5], 2, 7, ["passkey"], tmp_path / "a")
    b = retrieval_set.write_sets(words, [64, 128], [0.5], 2, 7, ["passkey"], tmp_path / "b")
    assert list(a) == [64, 128] and a[64].name == "retrieval_64.jsonl"
    for n in a:
        rows = read_jsonl(a[n])
        assert len(rows) == 2 and rows == read_jsonl(b[n])
        assert all(words(r["prompt"]) <= n for r in rows)
    other = retrieval_set.write_sets(words, [64], [0.5], 2, 8, ["passkey"], tmp_path / "c")
    assert read_jsonl(other[64]) != read_jsonl(a[64])


def test_the_printed_entries_are_probe_sets_of_the_same_prompts(tmp_path, in_repo, monkeypatch):
    written = retrieval_set.write_sets(words, [64], [0.1, 0.9], 1, 7, ["passkey", "niah_single"], tmp_path)
    text = retrieval_set.entries([64], "tasks=passkey,niah_single&depths=0.1,0.9&per_cell=1&seed=7")
    found = yaml.safe_load("eval:\n  tasks:\n" + text)["eval"]["tasks"]["retrieval_64"]
    assert found.pop("tolerances") == {"exact_match": {"abs": 5.0}} and found.pop("min_baseline") == {"exact_match": 50.0}
    spec = probe_sets.parse("eval.tasks.retrieval_64.data", found["data"])
    assert [r.as_dict() for r in probe_sets.rows(spec, words)] == read_jsonl(written[64])
    monkeypatch.setattr(tasks.paths, "probe_data", lambda model, name: written[64])
    built = tasks.build("retrieval_64", Task(**found), "m")
    assert built.num_docs == 4 and built.higher_is_better == {"exact_match": True}


@pytest.mark.parametrize("args, message", [
    (["--tasks", "haystack"], "qtier: retrieval: unknown task 'haystack'"),
    (["--depths", "1.5"], "qtier: retrieval: depths must be in [0, 1]"),
    (["--lengths", "0"], "qtier: retrieval: lengths, per_cell and sentences must be positive")])
def test_a_bad_argument_is_one_line_before_the_tokenizer_loads(tmp_path, args, message):
    with pytest.raises(SystemExit) as e:
        retrieval_set.main(["/nonexistent/tokenizer", "--out", str(tmp_path), *args])
    assert str(e.value).startswith(message) and not list(tmp_path.iterdir())
