"""The endpoint engine: an OpenAI-compatible server someone else runs (backend.py), through vllm's client."""
