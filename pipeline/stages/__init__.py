"""qtier's stages package."""
