"""params.yaml into the schema's dataclasses through the one typed parser (schema/typed.py, which
result.json's records use too): every mismatch one ConfigError naming the key path; a key given twice
is refused here, where the YAML is read.

    from pipeline.schema import builder; params = builder.load("params.yaml")
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline.schema import traced, typed
from pipeline.schema.errors import ConfigError
from pipeline.schema.params import Params
from pipeline.schema.yaml_io import SafeLoader

PARAMS_FILE = "params.yaml"


def parse(raw: Any) -> Params:
    """Build and self-check the params dataclasses from parsed YAML (no file or data checks), each
    object labelled with its key path (pipeline/schema/traced.py)."""
    return traced.label(typed.build(Params, raw, ""), "")


class _UniqueKeyLoader(SafeLoader):
    """A YAML loader that rejects a key given twice in one mapping (safe_load keeps the last)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(
                    f"{key}: duplicate key (line {seen[key] + 1} and line {key_node.start_mark.line + 1})"
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def load(path: str | Path = PARAMS_FILE) -> Params:
    """Read params.yaml into dataclasses; schema errors only (pipeline/config.py adds the rest)."""
    path = Path(path)
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 - SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse(raw)
