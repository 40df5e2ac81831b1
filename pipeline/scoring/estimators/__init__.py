"""Estimators: paired intervals, stratified reads, per-sample comparisons, fidelity, noise. Pure."""
