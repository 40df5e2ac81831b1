"""params.yaml into the schema's dataclasses through the one typed parser (schema/typed.py, which
result.json's records use too): every mismatch one ConfigError naming the key path; a key given twice
is refused here, where the YAML is read.

    from pipeline.schema import builder; params = builder.load("params.yaml")
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.schema import traced, typed, yaml_io
from pipeline.schema.errors import ConfigError
from pipeline.schema.params import Params

PARAMS_FILE = "params.yaml"


def parse(raw: Any) -> Params:
    """Build and self-check the params dataclasses from parsed YAML (no file or data checks), each
    object labelled with its key path (pipeline/schema/traced.py)."""
    return traced.label(typed.build(Params, raw, ""), "")


def load(path: str | Path = PARAMS_FILE) -> Params:
    """Read params.yaml into dataclasses; schema errors only (pipeline/config.py adds the rest)."""
    path = Path(path)
    try:
        raw = yaml_io.load_unique(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse(raw)
