"""prepare's tokenizer check (pipeline/domain/model/tokenizer_check.py) on fake tokenizers: one per way a
tokenizer that is not the model's shows itself."""
import re
from types import SimpleNamespace

from pipeline.domain.model import tokenizer_check
from pipeline.domain.model.tokenizer_check import findings


class Words:
    """A word-level tokenizer: about 5 characters a token on English, an exact round trip."""
    eos_token, bos_token, pad_token, chat_template = "</s>", "<s>", None, None

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def encode(self, text, add_special_tokens=True):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in re.findall(r"\S+|\s", text)]

    def decode(self, ids, skip_special_tokens=True):
        inverse = {i: w for w, i in self.vocab.items()}
        return "".join(inverse[i] for i in ids)


class Chars(Words):
    """Character-level: 1 character a token (a GGUF conversion gone wrong)."""
    def encode(self, text, add_special_tokens=True):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


class Lossy(Words):
    def decode(self, ids, skip_special_tokens=True):
        return super().decode(ids).lower()


def test_the_model_s_own_kind_of_tokenizer_has_no_finding():
    assert findings(Words(), SimpleNamespace(eos_token_id=2, bos_token_id=1)) == []


def test_a_character_level_tokenizer_is_found_by_its_characters_per_token():
    (found,) = findings(Chars())
    assert found.startswith("1.00 characters per token") and "character- or byte-level" in found


def test_a_lossy_round_trip_and_missing_special_tokens_are_found():
    assert any("decode(encode(text)) differs from the text from character 0" in f for f in findings(Lossy()))
    tok = Words()
    tok.bos_token = None
    assert findings(tok, SimpleNamespace(eos_token_id=2, bos_token_id=1)) == [
        "the model's config has a BOS token (id 1) the tokenizer does not name"]
    tok.eos_token = None
    assert "no pad or EOS token to pad a batch with" in findings(tok)


def test_a_chat_template_that_does_not_render_is_found():
    tok = Words()
    tok.chat_template = "{{ broken"

    def apply(*a, **k):
        raise ValueError("unexpected end of template")
    tok.apply_chat_template = apply
    assert findings(tok) == ["its chat template does not render (ValueError: unexpected end of template)"]


def test_the_fixed_text_is_english_prose_of_a_useful_length():
    assert 200 < len(tokenizer_check.TEXT) < 600 and tokenizer_check.TEXT.isascii()
