"""Probe sets written per model (pipeline/domain/sets/probe_sets.py): the spec, its size, and whether it fits
a model; the prompts measure their stated length in each model's own token count (unit: counters stand
in for tokenizers)."""
import pytest

from pipeline.domain.sets import probe_sets
from pipeline.schema import ConfigError

KEY = "eval.tasks.r.data"


def test_the_default_spec_is_the_committed_suite_s():
    spec = probe_sets.parse(KEY, "retrieval:1024")
    assert spec == probe_sets.ProbeSet(1024, ("niah_single",), (0.1, 0.5, 0.9), 1, 1234) and spec.samples == 3
    other = probe_sets.parse(KEY, "retrieval:2048?tasks=passkey,niah_single&depths=0.5&per_cell=2&seed=7")
    assert (other.tasks, other.depths, other.per_cell, other.seed, other.samples) == (
        ("passkey", "niah_single"), (0.5,), 2, 7, 4)


@pytest.mark.parametrize("data, message", [
    ("retrieval:abc", "expected retrieval:<tokens>"), ("retrieval:32", "at least 64 tokens"),
    ("retrieval:1024?size=3", "unknown option 'size'"), ("retrieval:1024?per_cell=x", "option per_cell 'x' is not a number"),
    ("retrieval:1024?tasks=haystack", "unknown task 'haystack'"), ("retrieval:1024?depths=1.5", "depths must be in")])
def test_a_bad_spec_is_one_line_naming_the_key(data, message):
    with pytest.raises(ConfigError, match=rf"^{KEY}: .*{message}"):
        probe_sets.parse(KEY, data)


@pytest.mark.parametrize("count, tokens", [(len, 4096), (lambda s: len(s.split()), 1024),
                                           (lambda s: (len(s) + 3) // 4, 2048)])
def test_each_counter_s_prompts_measure_the_stated_length_within_one_percent(count, tokens):
    """A character-level, a word-level and a four-characters-a-token vocabulary: each prompt is at most the
    stated length and within 1% of it, as that vocabulary counts."""
    rows = probe_sets.rows(probe_sets.parse(KEY, f"retrieval:{tokens}"), count)
    assert len(rows) == 3
    for r in rows:
        assert r.tokens == count(r.prompt) and 0.99 * tokens <= r.tokens <= tokens


def test_a_set_fits_the_model_s_context_and_on_vllm_its_max_model_len():
    spec = probe_sets.parse(KEY, "retrieval:4096")
    assert probe_sets.room(8192, "reference", 4608) == (8192, "the model's context (max_position_embeddings)")
    assert probe_sets.room(8192, "vllm", 4608) == (4608, "serving.vllm.max_model_len")
    assert probe_sets.room(None, "reference", 4608) == (None, "")
    assert probe_sets.misfit("r", spec, 16, 8192, "x") is None
    assert probe_sets.misfit("r", spec, 16, 4096, "the model's context (max_position_embeddings)") == (
        "eval.tasks.r.data: retrieval:4096 needs 4,176 tokens (4,096-token prompts, 16 answer tokens and a chat "
        "template) and the model's context (max_position_embeddings) is 4,096: lower the length or drop the task")
