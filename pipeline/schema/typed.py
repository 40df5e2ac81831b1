"""Plain data (params.yaml's YAML, result.json's and a serving record's JSON) to the typed dataclasses
and back, driven by their type hints: the one parser, the one writer and the one type-name printer.

    typed.build(Params, raw, "")                     # params.yaml (schema/builder.py)
    typed.build(TaskLooks, data, "result.looks.c")   # result.json's records (domain/result/records.py)
    typed.plain(looks)                               # a record as JSON writes it (fields at their default left out)

Every mismatch is one ConfigError starting with the key path (`tiers.int8.group_size: expected an
integer, got 'x'`; an unknown key with the closest known one); the caller adds the file. A dataclass's
own check (a FieldError) is prefixed with its key path. Imports nothing of the pipeline but the
schema's errors, so every layer can use it.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal

from pipeline.schema.errors import ConfigError, FieldError, near

# the reader's words for a type (docs/params.md; `doc=True`), beside Python's own (the errors)
DOC_WORDS = {str: "string", int: "integer", float: "number", bool: "true/false"}


def type_name(tp: Any, doc: bool = False, key: str = "<name>") -> str:
    """A type as an error names it (`float | 'calibrated'`, `list of int`, `mapping of Tier`), or with
    `doc` as docs/params.md does (`number or "calibrated"`, `mapping of `<name>` to section Tier`)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    join = " or " if doc else " | "
    if origin is Literal:
        return join.join(f'"{a}"' if doc else repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return join.join(type_name(a, doc, key) for a in args)
    if origin is list:
        return f"list of {type_name(args[0], doc, key)}"
    if origin is dict:
        return f"mapping of `{key}` to {type_name(args[1], doc, key)}" if doc else f"mapping of {type_name(args[1])}"
    if tp is type(None):
        return "null"
    if doc and dataclasses.is_dataclass(tp):
        return f"section {tp.__name__}"
    return (DOC_WORDS.get(tp) if doc else None) or getattr(tp, "__name__", str(tp))


def build(tp: Any, value: Any, key: str) -> Any:
    """`value` as a `tp`, every field checked; a ConfigError naming the key path otherwise."""
    origin = typing.get_origin(tp)
    if tp is Any:                            # free-form data (a sample row's document fields)
        return value
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{key}: {value!r} is not one of {type_name(tp)}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        if len(args) == 1:                   # `X | None` with a value: X's own, precise error
            return build(args[0], value, key)
        for arg in typing.get_args(tp):
            try:
                return build(arg, value, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {type_name(tp)}, got {value!r}")
    if tp is type(None):
        if value is not None:
            raise ConfigError(f"{key}: expected null, got {value!r}")
        return None
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (inner,) = typing.get_args(tp)
        return [build(inner, v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        _, inner = typing.get_args(tp)
        return {str(k): build(inner, v, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, value, key)
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
    raise TypeError(f"unsupported type {tp!r} at {key}")


def _dataclass(cls: Any, value: Any, key: str) -> Any:
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
            hint = near(str(k), list(fields)) or f" (known keys: {', '.join(fields)})"
            raise ConfigError(f"{prefix}{k}: unknown key{hint}")
    kwargs = {}
    for name, f in fields.items():
        if name in value:
            kwargs[name] = build(hints[name], value[name], f"{prefix}{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}: required key is missing")
    try:
        return cls(**kwargs)
    except FieldError as e:
        where = f"{prefix}{e.field}" if e.field else (key or "params")
        raise ConfigError(f"{where}: {e.message}") from None


def plain(obj: Any) -> Any:
    """A typed record as JSON or YAML writes it, the inverse of `build`: a dataclass's fields in order,
    those at their default left out (the parser gives them back), lists and mappings through."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            default = (f.default if f.default is not dataclasses.MISSING else f.default_factory()
                       if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            if default is dataclasses.MISSING or value != default:
                out[f.name] = plain(value)
        return out
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
