"""Greedy generation for the reference backend without the two wastes of `model.generate` on a batch.

1. Padding. A left-padded batch pays prompt processing for its longest prompt in every row: for 24
   summaries of 250-450 tokens a third of the prefill is padding. Here prompts are prefilled in
   length-sorted micro-batches whose padding stays under PREFILL_PADDING, and their KV caches are
   stacked (left-padded, masked) for decoding.
2. Finished rows. With lm-eval's stop strings (checked for the whole batch at once) a batch decodes
   for as long as its longest answer. Here a row leaves the batch, and the cache, as soon as it emits
   an eos token or its text contains a stop string.
3. Cache growth. transformers' DynamicCache appends each step's K/V with torch.cat, copying the whole
   cache at every layer of every step (40% of a decode step on a CPU, torch.profiler); here the cache
   is reserved once for prompt + max_gen_toks and written in place.
Each row sees the same tokens, mask and positions as with `generate` (only the float rounding of other
batch shapes differs), and lm-eval cuts the text at the first stop string either way, so the returned
continuation is the same. tests/test_generate.py compares the two on a tiny model.
"""
from __future__ import annotations

import torch

from pipeline.engines.reference import kvcache

PREFILL_PADDING = 0.05     # a prefill micro-batch grows while its padding stays under 5% of its tokens
# Beyond this many tokens a micro-batch takes only prompts of its own length: any padding needs an
# explicit mask, with which sdpa falls back from its flash kernel to one that materializes every
# layer's [rows, heads, L, L] scores; unpadded, transformers skips the mask and sdpa runs causal flash.
PAD_FREE_TOKENS = 1024

# generation_config fields that make `generate` differ from a plain argmax; with any of them set the
# reference backend falls back to `generate` itself
_PROCESSORS = {"repetition_penalty": (None, 1.0), "no_repeat_ngram_size": (None, 0), "bad_words_ids": (None,),
               "suppress_tokens": (None, []), "begin_suppress_tokens": (None, []), "forced_bos_token_id": (None,),
               "forced_eos_token_id": (None,), "min_length": (None, 0), "min_new_tokens": (None, 0),
               "sequence_bias": (None,), "encoder_repetition_penalty": (None, 1.0)}


def plain_greedy(model, kwargs: dict) -> bool:
    """True when generate() with these kwargs is plain greedy argmax decoding."""
    if kwargs.get("do_sample") or any(k not in ("do_sample", "temperature", "attention_mask") for k in kwargs):
        return False
    cfg = model.generation_config
    return all(getattr(cfg, k, None) in allowed for k, allowed in _PROCESSORS.items()) \
        and getattr(cfg, "num_beams", 1) in (None, 1)


def eos_ids(model) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set(eos if isinstance(eos, list) else [] if eos is None else [eos])


def prefill_groups(lengths: list[int], max_padding: float = PREFILL_PADDING,
                   pad_free: int = PAD_FREE_TOKENS) -> list[list[int]]:
    """Row indices in micro-batches: sorted by length, each grown while padding <= max_padding; a
    micro-batch of prompts longer than `pad_free` tokens has no padding at all."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        g = groups[-1] if groups else None
        if g is not None:
            longest = lengths[g[0]]
            real = sum(lengths[j] for j in g) + lengths[i]
            fits = lengths[i] == longest if longest > pad_free else longest * (len(g) + 1) <= (1 + max_padding) * real
            if fits:
                g.append(i)
                continue
        groups.append([i])
    return groups


def _prefill(model, rows: list[torch.Tensor]):
    """Left-padded forward of a few similar-length prompts: last logits and the cache."""
    from transformers import (
        DynamicCache,  # lazy: transformers is imported only where a model runs
    )

    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = r
        mask[i, width - len(r):] = 1
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    cache = DynamicCache()
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                   use_cache=True, logits_to_keep=1).logits[:, -1]
    return logits, cache


def reserved_layer_class(capacity: int):
    """A DynamicCache layer whose K/V live in buffers of `capacity` positions, written in place."""
    from transformers.cache_utils import DynamicLayer  # lazy, as above

    class ReservedLayer(DynamicLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                shape = (*key_states.shape[:2], capacity, key_states.shape[-1])
                self.k_buf, self.v_buf, self.length = key_states.new_empty(shape), value_states.new_empty(shape), 0
                self._mark()
            end = self.length + key_states.shape[-2]
            if end > capacity:
                raise ValueError(f"KV cache reserved for {capacity} positions, {end} needed")
            self.k_buf[:, :, self.length:end] = key_states
            self.v_buf[:, :, self.length:end] = value_states
            self.length = end
            self.keys, self.values = self.k_buf[:, :, :end], self.v_buf[:, :, :end]
            return self.keys, self.values

        def _mark(self):
            # append-only buffers: the fp8 KV attention may round them in place (kvcache.rounded)
            kvcache.reserve(self.k_buf)
            kvcache.reserve(self.v_buf)

        def batch_select_indices(self, indices):
            self.k_buf, self.v_buf = self.k_buf[indices], self.v_buf[indices]
            self._mark()
            self.keys, self.values = self.k_buf[:, :, :self.length], self.v_buf[:, :, :self.length]

    return ReservedLayer


def _stack(caches: list, widths: list[int], width: int, capacity: int):
    """One left-padded cache from several: each part's keys/values padded on the left to `width`,
    room for `capacity` positions in all."""
    from transformers import DynamicCache  # lazy, as above

    stacked = DynamicCache()
    stacked.layer_class_to_replicate = reserved_layer_class(capacity)   # layers are made on first update
    for layer in range(len(caches[0].layers)):
        keys, values = [], []
        for c, w in zip(caches, widths):
            k, v = c.layers[layer].keys, c.layers[layer].values
            pad = (0, 0, width - w, 0)
            keys.append(torch.nn.functional.pad(k, pad))
            values.append(torch.nn.functional.pad(v, pad))
        stacked.update(torch.cat(keys), torch.cat(values), layer)
    return stacked


def greedy(model, tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_length: int,
           stop: list[str], pad_id: int) -> torch.Tensor:
    """[batch, max_length] token ids like `generate` returns: prompt, then each row's greedy tokens,
    then pad_id after the row stopped."""
    batch, width = input_ids.shape
    out = torch.full((batch, max_length), pad_id, dtype=input_ids.dtype)
    out[:, :width] = input_ids
    eos = eos_ids(model)
    prompts = [input_ids[i][attention_mask[i].bool()] for i in range(batch)]
    lengths = [len(p) for p in prompts]
    with torch.inference_mode():
        parts, widths, active, first = [], [], [], []
        for group in prefill_groups(lengths):
            logits, cache = _prefill(model, [prompts[i] for i in group])
            parts.append(cache)
            widths.append(max(lengths[i] for i in group))
            active += group
            first.append(logits.argmax(-1))
        cache = _stack(parts, widths, width, max_length)
        nxt = torch.cat(first)
        mask = torch.zeros(batch, width, dtype=attention_mask.dtype)
        for j, row in enumerate(active):
            mask[j, width - lengths[row]:] = 1
        positions = torch.tensor([[lengths[row] - 1] for row in active])
        for step in range(max_length - width):
            keep = []
            for j, row in enumerate(active):
                token = int(nxt[j])
                out[row, width + step] = token
                if token in eos:
                    continue
                text = tokenizer.decode(out[row, width:width + step + 1], skip_special_tokens=True)
                if not any(s and s in text for s in stop):
                    keep.append(j)
            if not keep or step == max_length - width - 1:
                break
            if len(keep) < len(active):
                idx = torch.tensor(keep)
                cache.batch_select_indices(idx)
                nxt, mask, positions = nxt[idx], mask[idx], positions[idx]
                active = [active[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones(len(active), 1)], dim=1)
            positions = positions + 1
            nxt = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=positions, past_key_values=cache,
                        use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1)
    return out
