from types import SimpleNamespace

from pipeline.stages import prepare


class FakeTokenizer:
    def __init__(self):
        self.vocab = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
        self.eos_token, self.pad_token, self.model_max_length = "<|im_start|>", None, 10**30

    @property
    def eos_token_id(self):
        return self.vocab[self.eos_token]

    def convert_ids_to_tokens(self, i):
        return {v: k for k, v in self.vocab.items()}[i]


def test_fix_special_tokens_uses_config_eos_id():
    tok = FakeTokenizer()
    prepare.fix_special_tokens(tok, SimpleNamespace(eos_token_id=2, max_position_embeddings=8192))
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|im_end|>"
    assert tok.model_max_length == 8192


def test_fix_special_tokens_list_eos():
    tok = FakeTokenizer()
    prepare.fix_special_tokens(tok, SimpleNamespace(eos_token_id=[2, 0]))
    assert tok.eos_token == "<|im_end|>"
