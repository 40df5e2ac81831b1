"""The memory bill of a GGUF file, read from its tensor table: bytes and weights per GGUF type (block
scales included: a Q4_K block of 256 weights is 144 bytes, 4.5 bits a weight), and the total.

    python -m pipeline.domain.model.gguf_bill <file.gguf>
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def bill(tensors) -> dict:
    """{"weight_bytes", "weights", "by_type": {type: {tensors, weights, bytes, bits_per_weight}}} from
    (type name, number of weights, bytes) triples. Pure."""
    by_type: dict[str, dict] = {}
    for kind, weights, size in tensors:
        row = by_type.setdefault(kind, {"tensors": 0, "weights": 0, "bytes": 0})
        row["tensors"] += 1
        row["weights"] += int(weights)
        row["bytes"] += int(size)
    for row in by_type.values():
        row["bits_per_weight"] = round(8 * row["bytes"] / row["weights"], 3) if row["weights"] else None
    return {"weight_bytes": sum(r["bytes"] for r in by_type.values()),
            "weights": sum(r["weights"] for r in by_type.values()),
            "by_type": dict(sorted(by_type.items(), key=lambda kv: -kv[1]["bytes"]))}


def file_type(path: Path) -> str | None:
    """The file's own `general.file_type` as llama.cpp names it (MOSTLY_Q4_1 -> Q4_1), None if absent."""
    from gguf import GGUFReader, LlamaFileType

    field = GGUFReader(str(path)).fields.get("general.file_type")
    if field is None:
        return None
    return LlamaFileType(int(field.parts[field.data[0]][0])).name.removeprefix("MOSTLY_").removeprefix("ALL_")


def read(path: Path) -> dict:
    """bill() of a GGUF file (memory-mapped: only its header and tensor table are read)."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    return bill((t.tensor_type.name, t.n_elements, t.n_bytes) for t in reader.tensors)


if __name__ == "__main__":
    print(json.dumps(read(Path(sys.argv[1])), indent=2))
