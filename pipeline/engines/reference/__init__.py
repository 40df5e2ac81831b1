"""The reference engine: transformers in-process (backend.py) with its fast paths, KV formats and W8A8 arithmetic."""
