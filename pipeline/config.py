"""params.yaml, fully checked: the schema's own checks (pipeline/schema.py) composed with the checks
that need files, data or the model's geometry, each of which lives with its domain.

    python -m pipeline.config            # validate params.yaml, print the variants and the planned power

Every error is one line naming the key, file or value; exit code 2. No model is loaded.
"""
from __future__ import annotations

import sys
from pathlib import Path

from pipeline.domain import calibration, hardware, sources, tasks
from pipeline.quant import recipes
from pipeline.schema import PARAMS_FILE, ConfigError, Params
from pipeline.schema import load as load_schema

__all__ = ["ConfigError", "Params", "check", "load", "load_or_exit"]


def check(p: Params, root: Path) -> None:
    """Every check that needs something besides params.yaml itself."""
    kinds = list(hardware.table()[1])
    for name, m in p.models.items():
        sources.check_source(f"models.{name}.source", m.source, root)
    for name, t in p.tiers.items():
        if t.recipe and not (root / t.recipe).is_file():
            raise ConfigError(f"tiers.{name}.recipe: file not found: {t.recipe}")
        if t.hardware is not None and t.hardware not in kinds:
            raise ConfigError(f"tiers.{name}.hardware: unknown kind {t.hardware!r}; known: {', '.join(kinds)}")
    if not (root / p.calibration.path).is_file():
        raise ConfigError(f"calibration.path: file not found: {p.calibration.path}")
    calibration.texts(p.calibration, root)
    for name, task in p.eval.tasks.items():
        tasks.check_files(name, task, root)
        tasks.check_data(name, task, root)
    check_group_sizes(p, root)


def check_group_sizes(p: Params, root: Path) -> None:
    """Group sizes against each model's Linear widths, read from the model source itself (a local
    folder's config.json, the embedded GGUF's header). A hub model's geometry is unknown offline:
    its quantize stage checks it and records a failed tier naming the key."""
    for name, m in p.models.items():
        geometry = sources.geometry(m.source, root)
        if geometry is None:
            continue
        for tname, t in p.tiers.items():
            try:
                recipes.pick_group_size(t, geometry, f"tiers.{tname}")
            except recipes.RecipeError as e:
                raise ConfigError(f"{e} (model {name})") from None


def load(path: str | Path = PARAMS_FILE) -> Params:
    path = Path(path)
    params = load_schema(path)
    check(params, path.parent)
    return params


def load_or_exit(path: str | Path = PARAMS_FILE) -> Params:
    try:
        return load(path)
    except ConfigError as e:
        print(f"qtier: params error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def main() -> None:
    p = load_or_exit(sys.argv[1] if len(sys.argv) > 1 else PARAMS_FILE)
    for v in p.variants():
        print("-".join(v))


if __name__ == "__main__":
    main()
