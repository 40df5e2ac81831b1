"""The llama.cpp engine: GGUF tiers served by llama-cpp-python's server (backend.py), through the endpoint path."""
