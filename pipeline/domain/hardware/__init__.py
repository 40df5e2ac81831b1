"""Hardware: the GPUs each tier kind runs on, this machine, compute dtypes, memory, vLLM's KV formats."""
