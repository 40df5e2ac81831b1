"""How to read the report: the notes at its end, worded from the run's own settings. Pure."""
from __future__ import annotations

from pipeline.report.document import Header


def notes(header: Header) -> list[str]:
    scales = ", ".join(f"`{mode}` {scale}" for mode, scale in header.kv_scales.items()) or "no quantized KV mode"
    return [
        "Metrics are named `<task>/<metric>` (a task is an entry of `eval.tasks`): each task is scored, "
        "compared and judged on its own. The first table gives each task's verdict and the deltas that decided it; "
        "*Quality by task* gives each task's gated metrics (those with a tolerance; every metric is in "
        "`decision.json`), *Why each verdict* the interval each verdict rests on.",
        "Metric cells read `score (delta [interval], verdict)`, all on a 0-100 scale; the interval is the one the "
        "verdict was read on (*The run* says at which confidence). BLEU/chrF: sacrebleu corpus scores, the interval "
        "on their jackknife pseudo-values; ROUGE-L: rouge-score F-measure with stemming, mean over samples; "
        "Accuracy: log-likelihood choice over the label set, scored in float32 (an exact tie goes to the tied "
        "label at the document's position, the same on both sides of a pair). Same samples for every variant.",
        "Non-inferiority: a metric *passes* when the interval's lower bound is at or above -tolerance, *fails* "
        "when its upper bound is below -tolerance, and is *inconclusive* otherwise - or when the baseline scores "
        "below `decision.min_baseline` (the model cannot do the task, so differences mean nothing). A variant "
        "passes when every metric the model can do passes. An inconclusive metric says how many samples would "
        "settle it if the observed effect held (the interval narrows as 1/sqrt(n)).",
        "Power (its table): for each metric with a tolerance, SD is the spread the verdict's own interval "
        "implies (its half-width x sqrt(n) / z at the interval's confidence; the sample SD would plan from 0 "
        "where most outputs equal the baseline's, a size the interval cannot pass at), n the samples compared, MDD = "
        "(z(1-a) + z(0.8)) x SD / sqrt(n) the smallest tolerance this n shows non-inferiority for with 80% power "
        "when the tier is truly unchanged, and n80 = ceil(((z(1-a) + z(0.8)) x SD / tolerance)^2) the samples "
        "that give 80% power at the configured tolerance; a = (1 - confidence) / 2, one side of the verdict's "
        "interval. `python -m pipeline.config` prints the same figures for the next run's sample sizes.",
        "Recommendation: two axes, each a fixed sequence in order of decreasing memory (weights within 1% as "
        "equal, in params.yaml's order), the pick of each the last of its unbroken run of passes from the first: "
        "the weight tiers with the baseline's KV cache, the KV formats on the baseline's weights, and the "
        "combinations, each a candidate only when its weight tier and its KV format are both claimed on their "
        "own axes (else held: it stops its chain as a non-pass). The pick is the smallest in memory of the "
        "chains' picks; when no chain claims one, the baseline itself. Each chain is wrong at most one "
        "verdict's error, so the pick is worse than a margin at most that times the number of chains "
        "(docs/decisions/two-axis-pick.md). Per GPU, the same among the variants that GPU can run and "
        "that fit its memory. An *unchecked* verdict (settled in the run's arithmetic, not read in the second "
        "although the check ran for its variant) counts as inconclusive; where the check was skipped or is "
        "impossible, the verdicts rest on the run's arithmetic and the caveats on page 1 say so.",
        "Quality comes from the engine in the Backend column of *How each variant ran*, computing at the "
        "activation dtype in its Compute column: every variant of a model on one backend runs at one dtype, "
        "baseline included (vLLM on CPU: bfloat16; on a GPU: the model's dtype), and a row is compared only "
        "with the baseline of the same "
        "backend and compute dtype. On the reference backend (transformers) every tier computes "
        "in one dtype (Compute: on a CPU bfloat16 where the CPU has native bfloat16, else float32; on a GPU the "
        "model's dtype): quantized weights are decompressed into it, except in W8A8 layers, which compute as "
        "vLLM's kernels do from the checkpoint's 8-bit codes (int8: activations quantized per token, exact "
        "integer sums, float32 scales; fp8: e4m3 operands, float32 sums; the Compute column says so, and a "
        "W8A8 row without it was fake-quantized in the compute dtype by an older release), bitsandbytes tiers "
        "run bitsandbytes' own kernels, and the fp8 KV cache is "
        f"*simulated* by rounding K/V through float8_e4m3 with each KV mode's k/v scale ({scales}; 1.0 is vLLM's "
        "default without calibrated scales).",
        "Weights are the checkpoint's weight files (bitsandbytes: the packed tensors after load-time "
        "quantization, float tensors counted in the serving dtype). KV bytes/token = 2 x layers x KV heads x "
        "head dim x bytes of the KV dtype as vLLM stores it (auto = model dtype).",
    ]
