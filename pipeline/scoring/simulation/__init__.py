"""Simulation: the procedure's error rates replayed on a run's own samples (python -m pipeline.scoring.simulation.simulate). Pure."""
