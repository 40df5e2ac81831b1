"""The stages' exit policy on a params error: one line on stderr, exit code 2."""
from __future__ import annotations

import sys
from pathlib import Path

from pipeline.schema.builder import PARAMS_FILE, load
from pipeline.schema.errors import ConfigError
from pipeline.schema.params import Params


def load_or_exit(path: str | Path = PARAMS_FILE, loader=None) -> Params:
    """For stages: the check stage has run the full validation (pipeline/config.py) before DVC runs
    any of them; a stage re-checks the schema only, so its deps stay what it really reads. `loader`
    (default: this module's `load`) lets pipeline/config.py exit the same way after its full checks."""
    try:
        return (loader or load)(path)
    except ConfigError as e:
        print(f"qtier: params error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
