"""The evaluation protocol, whatever engine serves the variant: lm-eval's tasks run in looks
(looks_runner), their settled verdicts read again in the engine's second arithmetic
(second_arithmetic), per-sample rows kept across runs (sample_cache), fidelity against the baseline
(fidelity_compare) and by position (longctx). It drives an engine (pipeline/engines) and reads
verdicts with pipeline/scoring; the engines know nothing of either."""
