"""SmoothQuant's and AWQ's rescalings checked on the model before any rounding (issue 55): a smoothing
divides a smooth layer's output channels by scales and multiplies the balance layers' input columns by
them, which leaves the model's function unchanged only if that output reaches those layers' input
unchanged (or channel-wise), and only if dividing the smooth layer's weight divides its output.

    done = smoothing.checked(model, recipe, input_ids, "tiers.int8")      # oneshot.quantize
    done.recipe, done.mappings, done.kl                                   # run, recorded

llm-compressor (0.14) takes a recipe's SmoothQuantModifier.mappings, else its per-architecture
registry (modifiers/transform/smoothquant/utils.py MAPPINGS_REGISTRY, Llama-style by default), and
resolves each mapping's regexes per decoder layer (SmoothQuantModifier._resolve_mappings, used here so
the layers checked are the layers it will smooth). Nothing checks the result: on a "sandwich-norm"
model (Gemma 2/3: a norm on the attention output, `post_attention_layernorm`, and another before the
MLP, `pre_feedforward_layernorm`) the registry's `post_attention_layernorm -> gate/up` divides the
attention branch and multiplies gate/up weights whose input was never divided.

Structurally, `checked` traces one forward pass with hooks and, per resolved mapping, holds the smooth
layer's output against each balance layer's input (by value, not by name). A mapping that fails is
corrected when exactly one norm-like module (a 1-D weight) outputs the balance layers' input, under the
same name in every layer; else it is refused (SmoothingError, one line naming the layer and the mapping
to set). Each smooth layer is folded once on its traced input (weight / scales): one whose output is
not divided by them is refused. Numerically, each mapping's smoothing is applied alone as llm-compressor
applies it (`smooth`) and the logits' KL before rounding held to KL_ROUNDING; AWQ's mappings
(AWQModifier's registry, modifiers/transform/awq/mappings.py) get the KL check alone (`check_awq`).
The mappings used are written into the recipe, so results/quantize records them with their KLs.

Gemma-style norms compute `normalized * (1 + weight)`, where dividing the weight does not divide the
output; llm-compressor's oneshot converts them to `normalized * weight` for the whole run and back
after (llmcompressor/modeling/offset_norm.py: norm_calibration_context; the fold is then
w' = (1 + w) / s - 1), so every check here runs inside that same context: it sees the model as
oneshot's modifiers do. An offset norm that context does not know is refused by the fold check.
"""

import copy
from dataclasses import dataclass

from pipeline.quant.smoothing_kl import check_awq, check_numerically
from pipeline.quant.smoothing_maps import (SMOOTHQUANT, Mapping, SmoothingError, check_mapping, default_mappings,
                                           folds, modifier, resolve, trace)


@dataclass(frozen=True)
class Checked:
    """What quantize runs and records: the recipe with SmoothQuantModifier.mappings set, those mappings
    ([] without SmoothQuant), and each checked mapping's KL before rounding (SmoothQuant's and AWQ's;
    none in half precision)."""
    recipe: dict
    mappings: list[list]
    kl: dict[str, float]


def checked(model, recipe: dict, input_ids, key: str) -> Checked:
    """The recipe's rescalings checked (module docstring; AWQ's by KL alone: check_awq). SmoothingError
    on a mapping that cannot be made exact, a smooth layer that does not fold, or a KL above
    KL_ROUNDING. The model is left bit-identical: the norm context's 1 + weight round trip moves
    float32 norm weights by up to 6e-8, so the 1-D weights are put back as they were."""
    import torch
    from llmcompressor.modeling.offset_norm import norm_calibration_context

    norms = [(p, p.detach().clone()) for p in model.parameters() if p.ndim == 1]
    try:
        with norm_calibration_context(model):       # as oneshot runs the modifiers (module docstring)
            return _checked(model, copy.deepcopy(recipe), input_ids, key)
    finally:
        with torch.no_grad():
            for p, v in norms:
                p.copy_(v)


def _checked(model, recipe: dict, input_ids, key: str) -> Checked:
    kls = {f"AWQ {m}": v for m, v in check_awq(model, recipe, input_ids, key).items()}
    mod = modifier(recipe)
    if mod is None:
        return Checked(recipe, [], kls)
    given = mod.get("mappings")
    mappings = [Mapping(tuple(m[0]), m[1]) for m in given] if given else default_mappings(model)
    io, first_in = trace(model, input_ids)
    used = [check_mapping(model, io, first_in, m, key) for m in mappings]
    modules = dict(model.named_modules())
    for m in used:
        for smooth, _ in resolve(model, m):
            x, out = io[smooth]
            if not folds(modules[smooth], x, out):
                raise SmoothingError(
                    f"{key}: SmoothQuant cannot fold into {smooth} ({type(modules[smooth]).__name__}): dividing its "
                    f"weight does not divide its output (a norm scaled by 1 + weight that llm-compressor does not "
                    f"convert?); drop {SMOOTHQUANT} from the recipe or set its mappings to layers that fold")
    strength = mod.get("smoothing_strength", 0.5)                    # SmoothQuantModifier's default
    kls.update({f"SmoothQuant {m}": v for m, v in check_numerically(model, used, input_ids, strength, key).items()})
    mod["mappings"] = [m.as_recipe() for m in used]
    return Checked(recipe, mod["mappings"], kls)
