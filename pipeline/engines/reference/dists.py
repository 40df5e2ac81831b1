"""Next-token distributions of a transformers model on fixed token sequences, teacher-forced, for the
fidelity comparison (pipeline/scoring/estimators/fidelity.py). Reference backend only: it has the full logits, so
`exact` gives the full-vocabulary KL between two loaded models; `token_dists` the top-k the
fidelity_base stage keeps.

The LM head runs in float32 whatever the model computes in: at bfloat16 a logit of 20 is rounded by
up to 0.06, which alone puts a KL floor of ~1e-3 nats between two runs of one model - the size of an
8-bit tier's whole effect. The decoder stays in the compute dtype, like every other measurement.
The model's final soft-cap (Gemma 2) follows the head, in float32 (arch.logits); a model whose forward
does anything else after its head gives its own logits, in the compute dtype (arch.head_handback;
the session info says so).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.engines.reference import arch
from pipeline.engines.base import TokenDists


def _logprobs(model, seq: list[int]) -> torch.Tensor:
    """[len(seq) - 1, vocab] float32 log-probs of the token after each prefix seq[:t], t = 1..len-1."""
    ids = torch.tensor([seq[:-1]], device=model.device)
    if arch.head_handback(model) is not None:   # the forward does more after its head: its own logits
        return F.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return head_logprobs(model, model.get_decoder()(input_ids=ids).last_hidden_state[0])


def head_logprobs(model, hidden: torch.Tensor) -> torch.Tensor:
    """[positions, hidden] last hidden states -> [positions, vocab] float32 log-probs: the head in float32,
    the final soft-cap as the model's forward applies it (pipeline/engines/reference/arch.py)."""
    return F.log_softmax(arch.logits(model, hidden, float32=True), dim=-1)


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
