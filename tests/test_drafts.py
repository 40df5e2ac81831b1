"""Drafts (pipeline/engines/drafts.py): a draft changes how long greedy generation takes, never its text.
The walk over one prefill's choices is pure; the rest on a tiny model."""
import pytest
import torch

from pipeline.engines import drafts, generate

EOS = 0


def ends_at_eos(tokens):
    return tokens[-1] == EOS


@pytest.mark.parametrize("draft, argmax, budget, expected", [
    ([], [7], 10, ([7], False)),                             # no draft: the first token, as a plain prefill
    ([5, 6, 7], [5, 6, 7, 8], 10, ([5, 6, 7, 8], False)),    # all confirmed, then the model's next
    ([5, 6, 7], [5, 9, 7, 8], 10, ([5, 9], False)),          # parts at the second: its own token ends the walk
    ([5, 6, 7], [4, 6, 7, 8], 10, ([4], False)),             # parts at once: nothing of the draft kept
    ([5, EOS, 7], [5, EOS, 7, 8], 10, ([5, EOS], True)),     # the row ends inside the draft
    ([5, 6, 7], [5, 6, 7, 8], 2, ([5, 6], True)),            # the budget ends it
])
def test_confirmed_keeps_only_what_the_model_chooses(draft, argmax, budget, expected):
    assert drafts.confirmed(draft, argmax, budget, ends_at_eos) == expected


def test_store_dumps_and_loads(tmp_path):
    store = drafts.Drafts()
    store.remember([1, 2, 3], [4, 5])
    store.remember([1, 2], [])                               # an empty output is no draft
    store.dump(tmp_path / drafts.FILE)
    again = drafts.Drafts()
    assert again.load(tmp_path / drafts.FILE) == 1 and again.get([1, 2, 3]) == [4, 5] and again.get([1, 2]) == []
    assert again.load(tmp_path / "none.jsonl") == 0


@pytest.mark.model
def test_any_draft_gives_the_text_of_plain_greedy(tmp_path):
    """Right, partly right and wrong drafts, one ending past the budget: the same tokens as no draft."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests import tiny_model
    from tests.conftest import ROOT

    path = tiny_model.build(tmp_path, ROOT)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    prompts = ["The cat sat on", "Summarize: the committee met on Tuesday", "A", "x y z", "Numbers 1 2 3"]
    batch = tok(prompts, return_tensors="pt", padding=True)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    width, max_length = ids.shape[1], ids.shape[1] + 12

    def run(store):
        return generate.greedy(model, tok, ids, mask, max_length, ["zzzz"], tok.pad_token_id, store=store)

    plain = run(None)
    assert (plain[:, width:] != tok.pad_token_id).any()
    recorded = drafts.Drafts()
    assert torch.equal(run(recorded), plain)                 # an empty store: plain greedy, outputs recorded
    rows = [ids[i][mask[i].bool()].tolist() for i in range(len(prompts))]
    assert all(recorded.get(r) for r in rows)
    assert torch.equal(run(recorded), plain)                 # every draft right
    mixed = drafts.Drafts()
    for i, r in enumerate(rows):
        own = recorded.get(r)
        k = min(3, len(own) - 1)
        mixed.remember(r, [own[:k] + [(own[k] + 1) % 50] + own[k + 1:],  # parts at the fourth token
                           [(own[0] + 1) % 50] * 5,                  # parts at once
                           own + own,                                # runs past the budget
                           own[:1], own][i])
    assert torch.equal(run(mixed), plain)


@pytest.mark.model
def test_a_right_draft_saves_the_decoding_steps(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests import tiny_model
    from tests.conftest import ROOT

    path = tiny_model.build(tmp_path, ROOT)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(path)
    ids = tok(["The cat sat on"], return_tensors="pt")["input_ids"]
    mask = torch.ones_like(ids)
    calls = []
    real = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: calls.append(k["input_ids"].shape) or real(*a, **k))
    store = drafts.Drafts()
    generate.greedy(model, tok, ids, mask, ids.shape[1] + 10, ["zzzz"], tok.pad_token_id, store=store)
    plain_calls, calls[:] = len(calls), []
    generate.greedy(model, tok, ids, mask, ids.shape[1] + 10, ["zzzz"], tok.pad_token_id, store=store)
    assert plain_calls == 10 and len(calls) == 1 and calls[0][1] == ids.shape[1] + 9


@pytest.mark.model
def test_the_reference_backend_reads_drafts_once_a_stage_starts_them(tmp_path, monkeypatch):
    """Outside a stage greedy decodes plainly; after drafts.start() lm-eval's requests record and read
    drafts, with the same continuations."""
    from lm_eval.api.instance import Instance
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.engines.reference import reference_lm_class
    from tests import tiny_model
    from tests.conftest import ROOT

    monkeypatch.setattr(drafts, "STORE", None)
    path = tiny_model.build(tmp_path, ROOT)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    lm = reference_lm_class(add_bos=False)(pretrained=model, tokenizer=AutoTokenizer.from_pretrained(path),
                                           batch_size=4, max_length=128)
    kw = {"until": ["zzzz"], "do_sample": False, "max_gen_toks": 12}
    reqs = [Instance("generate_until", {}, (p, dict(kw)), i) for i, p in enumerate(["The cat", "x y z", "A b"])]
    plain = lm.generate_until(reqs, disable_tqdm=True)
    assert drafts.STORE is None
    store = drafts.start()
    assert drafts.start() is store
    assert lm.generate_until(reqs, disable_tqdm=True) == plain and store.confirmed == 0 and store.tokens > 0
    assert lm.generate_until(reqs, disable_tqdm=True) == plain and store.confirmed > 0
