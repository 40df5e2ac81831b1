"""Log-likelihood scoring for the reference backend: lm-eval's HFLM arithmetic, minus the waste.

HFLM's `_loglikelihood_tokens` runs the LM head and a full-vocabulary log-softmax at every input
position of every request (for a 49k vocabulary that is ~20% of a small model's FLOPs and a
[batch x length x vocab] float32 tensor per batch), then keeps only the continuation's positions.
Here the decoder runs once per distinct input, the token prefix every input of a batch shares (chat
template, system prompt, instruction: half of a short classification prompt) runs once per batch and
is attended from the cache, and the head and softmax run only at the positions a continuation is
scored on (then the model's final soft-cap, if it has one: arch.logits; a model whose forward does
anything else after its head is scored by HFLM itself, arch.head_handback). Inputs, truncation, right
padding without a mask and the greedy check
are HFLM's own, so the numbers are the same up to float rounding of the smaller head GEMM
(tests/test_loglik.py compares the two on a tiny model); the head and softmax run in float32.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline import runlog
from pipeline.engines.reference import arch

Request = tuple[tuple[str, str], list[int], list[int]]


def supported(model) -> bool:
    """The decoder's last hidden state -> arch.logits is the model's own forward (arch.head_handback)."""
    return arch.head_handback(model) is None


def shared_prefix(inputs: list[tuple[int, ...]], scored: list[int]) -> int:
    """Length of the token prefix all inputs share, short of every input's scored positions."""
    n = min(len(inp) - k for inp, k in zip(inputs, scored))
    first = inputs[0]
    for inp in inputs[1:]:
        i = 0
        while i < n and inp[i] == first[i]:
            i += 1
        n = i
    return max(n, 0)


def score(model, requests: list[Request], max_length: int, batch_size: int,
          share_prefix: bool = True) -> list[tuple[float, bool]]:
    """(sum of continuation log-probs, continuation is the greedy choice) for each request, in order."""
    inputs: dict[tuple[int, ...], int] = {}     # distinct model input -> positions to score at its end
    plan = []
    for _, ctx, cont in requests:
        inp = tuple((ctx + cont)[-(max_length + 1):][:-1])
        inputs[inp] = max(inputs.get(inp, 0), len(cont))
        plan.append((inp, cont))
    order = sorted(inputs, key=lambda t: (-len(t), t))     # longest first, as HFLM does
    logprobs: dict[tuple[int, ...], torch.Tensor] = {}
    from transformers import (
        DynamicCache,  # lazy: transformers takes seconds to import, only model stages need it
    )

    decoder = model.get_decoder()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            width = len(chunk[0])
            shared = shared_prefix(chunk, [inputs[inp] for inp in chunk]) if share_prefix else 0
            batch = torch.zeros(len(chunk), width - shared, dtype=torch.long)
            for i, inp in enumerate(chunk):
                batch[i, :len(inp) - shared] = torch.tensor(inp[shared:])
            cache = None
            if shared:
                cache = DynamicCache()
                decoder(input_ids=torch.tensor([chunk[0][:shared]]), past_key_values=cache, use_cache=True)
                cache.batch_repeat_interleave(len(chunk))
            # causal attention: the right padding is never seen by the positions before it
            hidden = decoder(input_ids=batch, past_key_values=cache, use_cache=cache is not None).last_hidden_state
            rows, cols = [], []
            for i, inp in enumerate(chunk):
                k = inputs[inp]
                rows += [i] * k
                cols += range(len(inp) - k - shared, len(inp) - shared)
            # the head and softmax in float32 at the scored positions (a vocabulary row per position):
            # in bfloat16 a label's log-likelihood is a multiple of 0.125 at logits of 16-32, and 5% of
            # the default model's classification items tied exactly (docs/decisions/float32-choices.md)
            picked = F.log_softmax(arch.logits(model, hidden[rows, cols], float32=True), dim=-1)
            at = 0
            for inp in chunk:
                k = inputs[inp]
                logprobs[inp] = picked[at:at + k]
                at += k
            runlog.progress(start + len(chunk), len(order), "log-likelihood inputs")
    out = []
    for inp, cont in plan:
        lp = logprobs[inp][-len(cont):]
        toks = torch.tensor(cont, dtype=torch.long)
        out.append((float(lp.gather(1, toks[:, None]).sum()), bool((lp.argmax(-1) == toks).all())))
    return out
