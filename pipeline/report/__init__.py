"""qtier's report package."""
