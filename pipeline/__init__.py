"""qtier: the pipeline package."""
