"""qtier's domain package."""
