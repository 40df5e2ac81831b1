"""The command line of llama-cpp-python's OpenAI-compatible server for one GGUF file. Pure."""
from __future__ import annotations

from pathlib import Path


def server_argv(py: Path, gguf: Path, alias: str, port: int, n_ctx: int, threads: int | None = None) -> list[str]:
    """`python -m llama_cpp.server` on 127.0.0.1:port serving `gguf` as `alias`. logits_all (the server's
    default, kept explicit) is what makes /v1/completions answer `logprobs`; n_ctx is the context the
    server allocates (llama-cpp-python's default, 2048, would truncate longer prompts silently)."""
    argv = [str(py), "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--logits_all", "true"]
    if threads:
        argv += ["--n_threads", str(threads)]
    return argv
