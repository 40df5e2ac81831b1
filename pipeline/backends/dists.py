"""Next-token distributions of a transformers model on fixed token sequences, teacher-forced, for the
fidelity comparison (pipeline/scoring/fidelity.py). Reference backend only: it has the full logits, so
`exact` gives the full-vocabulary KL between two loaded models; `token_dists` the top-k the
fidelity_base stage keeps.

The LM head runs in float32 whatever the model computes in: at bfloat16 a logit of 20 is rounded by
up to 0.06, which alone puts a KL floor of ~1e-3 nats between two runs of one model - the size of an
8-bit tier's whole effect. The decoder stays in the compute dtype, like every other measurement.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.backends.base import TokenDists


def _logprobs(model, seq: list[int]) -> torch.Tensor:
    """[len(seq) - 1, vocab] float32 log-probs of the token after each prefix seq[:t], t = 1..len-1."""
    hidden = model.get_decoder()(input_ids=torch.tensor([seq[:-1]], device=model.device)).last_hidden_state[0]
    return head_logprobs(model, hidden)


def head_logprobs(model, hidden: torch.Tensor) -> torch.Tensor:
    """[positions, hidden] last hidden states -> [positions, vocab] float32 log-probs, the head in float32."""
    head = model.get_output_embeddings()
    if head.weight.dtype.is_floating_point:
        logits = F.linear(hidden.float(), head.weight.float(), None if head.bias is None else head.bias.float())
    else:   # a load-time quantized head (bitsandbytes) has no float weight to upcast
        logits = head(hidden).float()
    return F.log_softmax(logits, dim=-1)


def token_dists(model, seqs: list[list[int]], k: int) -> list[TokenDists]:
    """Per sequence: the top-k next-token ids and log-probs at each position, and the argmax."""
    out = []
    with torch.inference_mode():
        for seq in seqs:
            lp = _logprobs(model, seq)
            values, ids = lp.topk(min(k, lp.shape[-1]), dim=-1)
            out.append(TokenDists(ids.cpu().numpy(), values.cpu().numpy().astype(np.float32),
                                  lp.argmax(-1).cpu().numpy()))
    return out


def exact(p_model, q_model, seqs: list[list[int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sequence: KL(P||Q) over the whole vocabulary at each position (nats) and whether the argmaxes
    agree; P is p_model's next-token distribution, Q q_model's."""
    out = []
    with torch.inference_mode():
        for seq in seqs:
            lp, lq = _logprobs(p_model, seq), _logprobs(q_model, seq)
            kl = (lp.exp() * (lp - lq)).sum(-1).clamp(min=0.0)   # rounding can leave -1e-9 for equal rows
            out.append((kl.double().cpu().numpy(), (lp.argmax(-1) == lq.argmax(-1)).cpu().numpy()))
    return out
