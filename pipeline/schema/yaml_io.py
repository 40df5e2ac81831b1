"""YAML read and written through libyaml when PyYAML was built with it, else PyYAML's pure-Python
classes: the same safe subset either way, about 10x faster with libyaml (params.yaml, dvc.yaml and
the task YAMLs are read by every check and by most tests).

    from pipeline.schema.yaml_io import SafeLoader, safe_load, safe_dump
"""
from __future__ import annotations

from typing import Any

import yaml

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a SafeLoader


def safe_dump(data: Any, **kwargs: Any) -> str:
    return yaml.dump(data, Dumper=SafeDumper, **kwargs)
