"""Is this the model's tokenizer? Checks prepare runs on the folder it writes, before any quantization:
a character-level or otherwise broken tokenizer (a GGUF conversion or a hand-assembled folder) passes
every later check and turns every prompt length, probe and verdict into something else.

    from pipeline.domain.model import tokenizer_check
    tokenizer_check.findings(tokenizer, config)     # [] when it looks like the model's own

Each finding is one clause naming what failed. Pure: any object with the transformers tokenizer API.
"""
from __future__ import annotations

# A fixed English text, written for this check (not from any data set): BPE and SentencePiece
# vocabularies of English models put 3-5 characters in a token here; a character- or byte-level
# tokenizer 1, a vocabulary of another script far fewer than 2.
TEXT = ("The committee met on Tuesday to review the quarterly budget. After a long discussion about "
        "travel costs, the members agreed to postpone the new laboratory until the spring, and asked the "
        "treasurer to prepare a shorter report for the next meeting.")
CHARS_PER_TOKEN = (2.0, 8.0)
RECORD_KEY = "tokenizer_check"      # in qtier_source.json: {"findings": [...], "overridden": bool}


def findings(tokenizer, config=None) -> list[str]:
    """What looks wrong with `tokenizer` for the model whose `config` (its eos/bos token ids) it serves."""
    found = []
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    per = len(TEXT) / max(len(ids), 1)
    lo, hi = CHARS_PER_TOKEN
    if not lo <= per <= hi:
        found.append(f"{per:.2f} characters per token on a fixed English text (an English model's tokenizer: "
                     f"{lo:g}-{hi:g}; 1 is character- or byte-level)")
    back = tokenizer.decode(ids, skip_special_tokens=True)
    if back.strip() != TEXT:
        at = next((i for i, (a, b) in enumerate(zip(back.strip(), TEXT)) if a != b), min(len(back.strip()), len(TEXT)))
        found.append(f"decode(encode(text)) differs from the text from character {at}")
    for kind in ("eos", "bos"):
        wanted = getattr(config, f"{kind}_token_id", None) if config is not None else None
        if wanted is not None and getattr(tokenizer, f"{kind}_token", None) is None:
            found.append(f"the model's config has a {kind.upper()} token (id {wanted}) the tokenizer does not name")
    if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None) is None:
        found.append("no pad or EOS token to pad a batch with")
    if getattr(tokenizer, "chat_template", None):
        try:
            tokenizer.apply_chat_template([{"role": "user", "content": "Hello."}], tokenize=False,
                                          add_generation_prompt=True)
        except Exception as e:  # noqa: BLE001  (a template is user code: any error is the finding)
            found.append(f"its chat template does not render ({type(e).__name__}: {e})")
    return found
