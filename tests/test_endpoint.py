"""An existing server as a tier (pipeline/engines/endpoint/backend.py): the schema, the key read from the
environment, the session against fake servers in this process (with and without prompt log-probs),
the refused log-likelihood tasks, and the endpoint judged against the run's baseline. No model: the
real server is tests/test_endpoint_e2e.py."""
import json
from types import SimpleNamespace

import pytest

from pipeline import paths
from pipeline.engines.endpoint import backend as endpoint
from pipeline.engines.base import Unsupported
from pipeline.domain.sets.tasks import TaskSpec, is_loglik
from pipeline.report import commands
from pipeline.schema import Baseline, Decision, FieldError, Tier
from pipeline.scoring.verdict import judge
from pipeline.scoring.verdict.rows import Evidence, Judgement, Row
from pipeline.evaluation.lm_eval_runner import without_refused
from tests import result_files
from tests.fake_openai import Servers
from tests.test_vllm_backend import variant

SERVER = {"method": "endpoint", "base_url": "http://10.0.0.5:8000", "served_model": "m-int8", "hardware": "int8-w8a8"}


def test_an_endpoint_tier_names_a_server_and_nothing_to_quantize_with():
    t = Tier(**SERVER, api_key_env="MY_KEY")
    assert (t.base_url, t.served_model, t.api_key_env) == ("http://10.0.0.5:8000", "m-int8", "MY_KEY")
    for kw, key in [({"base_url": "10.0.0.5:8000"}, "base_url"), ({"base_url": "http://h:1/v1"}, "base_url"),
                    ({"served_model": ""}, "served_model"), ({"api_key_env": "sk-abc123!"}, "api_key_env"),
                    ({"recipe": "r.yaml"}, "recipe"), ({"weight_bits": 8}, "weight_bits")]:
        with pytest.raises(FieldError) as e:
            Tier(**{**SERVER, **kw})
        assert e.value.field == key
    with pytest.raises(FieldError, match="only a tier with method 'endpoint' names a server"):
        Tier(method="rtn", recipe="r.yaml", weight_bits=8, hardware="int8-w8a8", base_url="http://h:1")


def test_the_key_comes_from_the_named_variable_and_an_unset_one_is_unsupported():
    assert endpoint.api_key(None, "t", {}) is None
    assert endpoint.api_key("K", "t", {"K": "secret"}) == "secret"
    with pytest.raises(Unsupported, match=r"^tiers\.t\.api_key_env: the environment variable K is not set$"):
        endpoint.api_key("K", "t", {})


def spec(name, kind, output_type=None):
    return TaskSpec(name, kind, {"output_type": output_type} if output_type else {}, name, 4, {})


def test_loglik_tasks_are_dropped_with_the_reason_and_none_left_is_unsupported():
    assert is_loglik(spec("c", "classify")) and is_loglik(spec("r", "lm_eval", "multiple_choice"))
    assert not is_loglik(spec("g", "generate", "generate_until"))
    specs = [spec("g", "generate", "generate_until"), spec("c", "classify")]
    result = {}
    assert without_refused(specs, None, result) == specs and result == {}
    assert [s.name for s in without_refused(specs, "no prompt log-probs", result)] == ["g"]
    assert result == {"refused": {"c": "no prompt log-probs"}}
    with pytest.raises(Unsupported, match="no prompt log-probs"):
        without_refused([spec("c", "classify")], "no prompt log-probs", {})


@pytest.fixture
def serve():
    servers = Servers()
    yield lambda prompt_logprobs=True: servers.start(prompt_logprobs=prompt_logprobs)
    servers.close()


def endpoint_variant(tmp_path, url, kv="auto", key_env=None):
    v = variant(tmp_path, kv=kv)
    (v.checkpoint / paths.ENDPOINT_REF).write_text(json.dumps({"base_url": url, "served_model": "m",
                                                              "api_key_env": key_env}))
    return v


@pytest.mark.parametrize("prompt_logprobs", [True, False])
def test_a_session_checks_the_contract_and_sends_the_key(tmp_path, monkeypatch, serve, prompt_logprobs):
    from pipeline.schema import Eval, Vllm

    url, seen = serve(prompt_logprobs)
    monkeypatch.setattr(endpoint, "_encoder", lambda tok: str.split)
    monkeypatch.setattr(endpoint, "_local_completions", lambda *a, **k: SimpleNamespace(args=a, kwargs=k))
    monkeypatch.setenv("EP_KEY", "sk-test")
    backend = endpoint.EndpointBackend(Vllm(python="/nonexistent/python"), Eval(tasks={}))
    with backend.session(endpoint_variant(tmp_path, url, key_env="EP_KEY")) as s:
        assert s.info["backend"] == "endpoint" and s.info["base_url"] == url
        assert s.info["contract"]["prompt_logprobs"] is prompt_logprobs
        assert (s.loglik_refusal is None) is prompt_logprobs
        assert s.lm.kwargs["api_key"] == "sk-test" and s.env["OPENAI_API_KEY"] == "sk-test"
        # prompts truncated to the server's own context (GET /v1/models), not serving.vllm.max_model_len
        assert s.info["max_model_len"] == 777 == s.lm.args[3].max_model_len
        assert "serving.vllm.python" in s.info["load_skipped"]
    assert seen and set(seen) == {"Bearer sk-test"}
    assert "sk-test" not in json.dumps(s.info)


def test_another_kv_mode_and_a_dead_server_are_unsupported(tmp_path):
    from pipeline.schema import Eval, Vllm

    backend = endpoint.EndpointBackend(Vllm(python="/nonexistent/python", first_request_timeout_s=2), Eval(tasks={}))
    with pytest.raises(Unsupported, match="KV cache is its server's"):
        with backend.session(endpoint_variant(tmp_path, "http://127.0.0.1:9", kv="fp8")):
            pass
    with pytest.raises(Unsupported, match=r"^endpoint http://127\.0\.0\.1:9 did not answer"):
        with backend.session(endpoint_variant(tmp_path, "http://127.0.0.1:9")):
            pass


def row(tier, backend, compute=None, **kw):
    # the typed records as decide reads them (tests/result_files.py: through result.json's parser)
    return result_files.measured(tier, backend=backend, compute_dtype=compute, metrics={"t/acc": 90.0},
                                 higher_is_better={"t/acc": True}, **kw)


def test_an_endpoint_is_judged_against_the_runs_baseline_and_says_where_it_is_served():
    base = row("fp16", "reference", "float32")
    ep = row("served", "endpoint", serving={"base_url": "http://h:8000", "served_model": "m-int8"},
             hardware="int8-w8a8")
    bases = judge.baselines([base, ep], Decision(Baseline(tier="fp16", kv="auto"), tolerances={}))
    assert judge.baseline_for(ep, bases) is base
    assert judge.baseline_for(row("int8", "vllm", "bfloat16"), bases) is None     # others pair by engine
    assert commands.serve_command(Row(ep, Evidence(), Judgement("pass")), "float16", "auto") == \
        "# already served: m-int8 at http://h:8000"


def test_an_endpoint_is_a_candidate_on_each_gpu_its_family_runs_on_without_a_memory_plan():
    from pipeline.schema import TargetGpu
    from pipeline.scoring.pick import recommend

    def judged(facts, overall):
        return Row(facts, Evidence(), Judgement(overall))
    found = [judged(row("fp16", "reference", "float32"), "baseline"),
             judged(row("served", "endpoint", serving={"base_url": "http://h:8000", "served_model": "m-int8"},
                        hardware="int8-w8a8"), "pass"),
             judged(row("int8", "vllm", "bfloat16", hardware="int8-w8a8"), "pass")]
    # no variant has a plan: the endpoint's weights are on its server, the others' plans are not made here
    assert recommend.gpu_candidates(found, "m", "L4", TargetGpu(24, 300, 8.9), {}) == {("served", "auto")}
    assert recommend.gpu_candidates(found, "m", "V100", TargetGpu(32, 900, 6.0), {}) == set()


def test_page_one_says_an_endpoint_s_line_is_sized_by_its_server():
    from pipeline.report import summary
    from tests.test_report import model_report

    ep = Row(row("served", "endpoint", serving={"base_url": "http://h:8000", "served_model": "m-int8"}), Evidence(),
             Judgement("pass"))
    command = commands.serve_command(ep, "float16", "auto")
    lines = summary.recommendation_lines(model_report([ep], ep, "it passes", command))
    assert lines[2] == ("Serve: `# already served: m-int8 at http://h:8000` (sized by its server; the same line under "
                        "*Per target GPU*).")
