"""qtier's scoring package."""
