"""Every backend's session implements the whole base.Session Protocol (what evaluate calls). Model tier:
the reference session's module imports torch."""
import inspect

import pytest

pytestmark = pytest.mark.model

from pipeline.engines import base
from pipeline.engines.reference.backend import ReferenceSession
from pipeline.engines.vllm.session import VllmSession, WallBudget


def protocol_members() -> set[str]:
    methods = {n for n, v in vars(base.Session).items() if inspect.isfunction(v) and not n.startswith("_")}
    return methods | set(base.Session.__annotations__)


def test_protocol_names_what_evaluate_calls():
    assert {"lm", "info", "full_logits", "engine_version", "chat", "remaining_s", "throughput", "token_dists",
            "exact_fidelity"} \
        <= protocol_members()


@pytest.mark.parametrize("cls", [ReferenceSession, VllmSession])
def test_every_session_implements_every_method(cls):
    methods = {n for n, v in vars(base.Session).items() if inspect.isfunction(v) and not n.startswith("_")}
    missing = [n for n in methods if not inspect.isfunction(getattr(cls, n, None))]
    assert not missing, f"{cls.__name__} lacks {missing}"
    assert isinstance(cls.full_logits, bool)


def test_reference_has_no_budget_and_vllm_counts_down():
    assert ReferenceSession(None, None, None, {}, False, False).remaining_s() is None
    t = [100.0]
    s = VllmSession(None, None, "", "", None, {}, None, {}, wall=WallBudget(30, clock=lambda: t[0]), chat=False)
    t[0] += 10
    assert s.remaining_s() == 20.0
    assert VllmSession(None, None, "", "", None, {}, None, {}, chat=False).remaining_s() is None


def test_vllm_has_no_exact_fidelity():
    with pytest.raises(base.Unsupported, match="top-k"):
        VllmSession(None, None, "", "", None, {}, None, {}, chat=False).exact_fidelity(None, [[1, 2]])
