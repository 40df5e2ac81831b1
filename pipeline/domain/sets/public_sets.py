"""Public standard eval sets named in params.yaml instead of a local JSONL (needs internet).

    eval.tasks.<name>.data: sacrebleu:wmt19?langpair=en-de          -> rows {source, reference}
    eval.tasks.<name>.data: hf:abisee/cnn_dailymail?name=3.0.0&split=test
                                                                   -> rows with the dataset's columns
                                                                      (ClassLabel ints become names)

The `evalsets` stage (python -m pipeline.stages.evalsets) downloads each one once into
artifacts/eval_data/<task>.jsonl; after that every stage reads the local copy like any JSONL.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import parse_qs

from pipeline.schema import ConfigError

SCHEMES = ("sacrebleu", "hf")


@dataclass(frozen=True)
class PublicSet:
    scheme: str
    name: str
    options: dict[str, str]


def is_public(data: str | None) -> bool:
    return data is not None and data.partition(":")[0] in SCHEMES and "?" in data


def parse(key: str, data: str) -> PublicSet:
    """Parse and check a spec offline; errors name the key."""
    scheme, _, rest = data.partition(":")
    name, _, query = rest.partition("?")
    if scheme not in SCHEMES or not name:
        raise ConfigError(f"{key}: {data!r} is not 'sacrebleu:<test set>?langpair=..' or 'hf:<dataset>?split=..'")
    options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    allowed = {"sacrebleu": {"langpair"}, "hf": {"name", "split", "revision"}}[scheme]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"{key}: unknown option {unknown[0]!r} in {data!r}; allowed: {', '.join(sorted(allowed))}")
    if scheme == "sacrebleu":
        if "langpair" not in options:
            raise ConfigError(f"{key}: {data!r} needs ?langpair=<src>-<tgt>")
        from sacrebleu.dataset import DATASETS

        if name not in DATASETS:
            raise ConfigError(f"{key}: sacrebleu has no test set {name!r}")
        pairs = list(DATASETS[name].langpairs)
        if options["langpair"] not in pairs:
            raise ConfigError(f"{key}: sacrebleu test set {name!r} has no langpair {options['langpair']!r}; "
                              f"it has {', '.join(p for p in pairs if '-' in p)}")
    elif "split" not in options:
        raise ConfigError(f"{key}: {data!r} needs ?split=<split> (e.g. test)")
    return PublicSet(scheme, name, options)


def rows(spec: PublicSet, load_dataset: Callable | None = None) -> Iterable[dict]:
    """The set's rows as plain dicts (downloads)."""
    if spec.scheme == "sacrebleu":
        from sacrebleu.dataset import DATASETS

        ds = DATASETS[spec.name]
        pair = spec.options["langpair"]
        ds.maybe_download()
        for i, (src, refs) in enumerate(zip(ds.source(pair), ds.references(pair))):
            yield {"id": f"{spec.name}-{pair}-{i}", "source": src, "reference": refs[0].strip()}
        return
    if load_dataset is None:
        from datasets import load_dataset
    ds = load_dataset(spec.name, spec.options.get("name") or None, split=spec.options["split"],
                      revision=spec.options.get("revision") or None)
    labels = {col: feat for col, feat in ds.features.items() if hasattr(feat, "int2str")}
    for row in ds:
        yield {k: labels[k].int2str(v) if k in labels else v for k, v in row.items()}


def to_jsonl(items: Iterable[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in items)
