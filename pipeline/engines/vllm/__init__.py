"""The vLLM engine: a `vllm serve` qtier starts (backend.py), and the OpenAI-compatible client an endpoint reuses."""
