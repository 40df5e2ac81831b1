"""Which params.yaml keys a stage reads, recorded while it runs: the evidence `python -m scripts.dvc_deps
--trace` holds against each stage's `params:` in dvc.yaml (docs/decisions/deps-by-trace.md).

Every object `parse` returns is labelled with its key path (`serving.vllm.budget`), and its mappings
(tiers, eval.tasks, ...) are `Section`s. Nothing is recorded until `start()` (the stage runner calls
it when QTIER_TRACE is set); then a scalar or list read through an attribute or a key is the read of
its path, asking whether a mapping has a key (`tier in params.tiers`) reads that key, and walking a
mapping (iterating, items(), len()) reads the whole of it. A read through an object that has no label
(made outside `parse` and `replaced`) is recorded as `?<Class>.<field>`, which the check names.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any

import yaml

READ: set[str] | None = None        # None: not recording
KEY = "_qtier_key"


def _note(path: str | None) -> None:
    if READ is not None and path is not None:       # None: a copy (asdict's) of a read mapping
        READ.add(path)


def _leaf(value: Any) -> bool:
    return not (isinstance(value, Section) or dataclasses.is_dataclass(value))


class Section(dict):
    """A mapping of params.yaml; a plain dict but for what it records while tracing."""
    _key: str | None = None

    def __getitem__(self, k):
        value = dict.__getitem__(self, k)
        if _leaf(value):
            _note(self._key and f"{self._key}.{k}")
        return value

    def get(self, k, default=None):
        if dict.__contains__(self, k):
            return self[k]
        _note(self._key and f"{self._key}.{k}")
        return default

    def __contains__(self, k) -> bool:
        _note(self._key and f"{self._key}.{k}")
        return dict.__contains__(self, k)

    def _whole(name):       # noqa: N805 - builds the methods that walk the mapping
        method = getattr(dict, name)

        def walk(self, *args):
            _note(self._key)
            return method(self, *args)
        return walk

    __iter__, __len__ = _whole("__iter__"), _whole("__len__")
    keys, values, items = _whole("keys"), _whole("values"), _whole("items")
    del _whole


yaml.SafeDumper.add_representer(Section, yaml.representer.SafeRepresenter.represent_dict)


def label(obj: Any, key: str) -> Any:
    """`obj` (a parsed params object) with every dataclass below it labelled and every dict a Section."""
    if isinstance(obj, dict):
        section = obj if isinstance(obj, Section) else Section(dict.items(obj))
        section._key = key
        for k, v in dict.items(section):
            dict.__setitem__(section, k, label(v, f"{key}.{k}"))
        return section
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        object.__setattr__(obj, KEY, key)
        for f in dataclasses.fields(obj):
            value = object.__getattribute__(obj, f.name)
            object.__setattr__(obj, f.name, label(value, f"{key}.{f.name}" if key else f.name))
    return obj


def replaced(obj: Any, **changes: Any) -> Any:
    """dataclasses.replace for a labelled params object: the copy keeps its label. Copying and the copy's
    own validation read nothing: what the stage then reads through the copy is recorded."""
    global READ
    recording, READ = READ, None
    try:
        copy = dataclasses.replace(obj, **changes)
    finally:
        READ = recording
    key = object.__getattribute__(obj, "__dict__").get(KEY)
    return copy if key is None else label(copy, key)      # None: made outside parse (a test's own)


def _traced_getattribute(self, name: str) -> Any:
    value = object.__getattribute__(self, name)
    if READ is not None and name in type(self).__dataclass_fields__ and _leaf(value):
        key = self.__dict__.get(KEY)
        READ.add(f"?{type(self).__name__}.{name}" if key is None else f"{key}.{name}" if key else name)
    return value


def start(root_type: type) -> set[str]:
    """Record from now on every read through the dataclasses reachable from `root_type`; returns the set."""
    global READ
    todo, seen = [root_type], set()
    while todo:
        cls = todo.pop()
        if cls in seen or not dataclasses.is_dataclass(cls):
            continue
        seen.add(cls)
        cls.__getattribute__ = _traced_getattribute
        for hint in typing.get_type_hints(cls).values():
            todo += [hint, *_args(hint)]
    READ = set()
    return READ


def _args(tp: Any) -> list:
    out = []
    for a in typing.get_args(tp):
        out += [a, *_args(a)]
    return out
