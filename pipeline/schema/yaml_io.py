"""YAML read and written through libyaml when PyYAML was built with it, else PyYAML's pure-Python
classes: the same safe subset either way, about 10x faster with libyaml (params.yaml, dvc.yaml and
the task YAMLs are read by every check and by most tests). `load_unique` is the one reader that refuses
a key given twice (params.yaml, docs/params_doc.yaml): safe_load keeps the last copy, silently.

    from pipeline.schema.yaml_io import SafeLoader, safe_load, safe_dump, load_unique
"""
from __future__ import annotations

from typing import Any

import yaml

from pipeline.schema.errors import ConfigError

SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a SafeLoader


def safe_dump(data: Any, **kwargs: Any) -> str:
    return yaml.dump(data, Dumper=SafeDumper, **kwargs)


class DuplicateKey(ConfigError):
    """A key given twice in one mapping: the key and the lines of its two copies."""

    def __init__(self, key: Any, first: int, second: int):
        self.key, self.first, self.second = key, first, second
        super().__init__(f"{key}: duplicate key (line {first} and line {second})")


class _UniqueKeyLoader(SafeLoader):
    """A SafeLoader that rejects a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKey(key, seen[key], line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_unique(text: str) -> Any:
    """safe_load's value; a key given twice in one mapping is a DuplicateKey (a ConfigError naming it
    and both lines; the caller adds the file)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
