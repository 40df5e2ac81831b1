"""qtier's quant package."""
