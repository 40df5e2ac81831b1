"""The typed YAML builder: params.yaml's mappings into the schema's dataclasses, driven by their type
hints; every mismatch one ConfigError naming the key path."""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.schema import traced
from pipeline.schema.errors import ConfigError, FieldError
from pipeline.schema.params import Params
from pipeline.schema.yaml_io import SafeLoader

PARAMS_FILE = "params.yaml"


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"mapping of {_type_name(typing.get_args(tp)[1])}"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _build(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{key}: {value!r} is not one of {_type_name(tp)}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        if len(args) == 1:                   # `X | None` with a value: X's own, precise error
            return _build(args[0], value, key)
        errors = []
        for arg in typing.get_args(tp):
            try:
                return _build(arg, value, key)
            except ConfigError as e:
                errors.append(e)
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{key}: expected null, got {value!r}")
        return None
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (inner,) = typing.get_args(tp)
        return [_build(inner, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        _, inner = typing.get_args(tp)
        return {str(k): _build(inner, v, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {key}")


def _build_dataclass(cls: Any, value: Any, key: str) -> Any:
    prefix = f"{key}." if key else ""
    if not isinstance(value, dict):
        raise ConfigError(f"{key or 'params'}: expected a mapping, got {value!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    retired = getattr(cls, "RETIRED", {})
    for k in value:
        if k in retired:
            raise ConfigError(f"{prefix}{k}: {retired[k]}")
        if k not in fields:
            close = difflib.get_close_matches(str(k), list(fields), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(fields)})"
            raise ConfigError(f"{prefix}{k}: unknown key{hint}")
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = _build(hints[name], value[name], f"{prefix}{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}: required key is missing")
    try:
        return cls(**kwargs)
    except FieldError as e:
        where = f"{prefix}{e.field}" if e.field else (key or "params")
        raise ConfigError(f"{where}: {e.message}") from None


def parse(raw: Any) -> Params:
    """Build and self-check the params dataclasses from parsed YAML (no file or data checks), each
    object labelled with its key path (pipeline/schema/traced.py)."""
    return traced.label(_build_dataclass(Params, raw, ""), "")


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
