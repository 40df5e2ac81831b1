"""A tier of `method: gguf` made into its tier folder: the GGUF file llama.cpp's server will load.

- gguf_type: the source folder (the model as qtier prepared it, Hugging Face layout) converted to an F16
  GGUF by llama.cpp's convert_hf_to_gguf.py (run by this environment's torch/transformers, from the
  llama.cpp tree install.sh --llama-cpp unpacks into .venv-llama/llama.cpp), then quantized to the type
  by llama.cpp's llama_model_quantize (through llama-cpp-python, in .venv-llama). No importance matrix.
  A GGUF-sourced model (embedded:) is requantized from its own file (make() says why).
- gguf_file: `embedded` (the embedded model's own file) or a .gguf path, served as it is.

The folder gets paths.GGUF_REF: the file, its type and its memory bill (pipeline/domain/model/gguf_bill.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline import io, paths, schema
from pipeline.domain.model import gguf_bill, sources
from pipeline.schema.gguf import EMBEDDED_FILE, FTYPES

QUANTIZE = """
import sys, llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = int(sys.argv[3])
params.nthread = 0
params.allow_requantize = sys.argv[4] == "requantize"
rc = llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), params)
sys.exit(f"llama_model_quantize returned {rc}" if rc else 0)
"""


class GgufUnavailable(RuntimeError):
    """What this tier needs and is missing (the llama.cpp environment, an embedded source)."""


def source_file(tier: schema.Tier, model_source: str, root: Path) -> Path:
    """The published file a gguf_file tier serves."""
    if tier.gguf_file == EMBEDDED_FILE:
        kind, _, ref = model_source.partition(":")
        if kind != "embedded":
            raise GgufUnavailable(f"gguf_file: embedded names the embedded model's own GGUF; this model's "
                                  f"source is {model_source}")
        return sources.embedded_gguf_path(ref)
    path = Path(tier.gguf_file)
    return path if path.is_absolute() else root / path


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {' | '.join(tail)}")


def make(src: Path, gguf_type: str, out_file: Path, root: Path = Path("."), source_gguf: Path | None = None) -> None:
    """src (a Hugging Face folder) -> F16 GGUF -> gguf_type, written to out_file. A model whose source is a
    GGUF file (embedded:) is requantized from that file instead: llama.cpp dequantizes its tensors to
    float, the very weights prepare gave the baseline, and its vocabulary stays the one llama.cpp wrote
    (the converter reads the prepared folder's tokenizer, rebuilt by transformers with byte_fallback, as a
    SentencePiece one, and writes a vocabulary llama.cpp then fails to tokenize with)."""
    tree, py = root / paths.LLAMA_TREE, root / paths.LLAMA_PYTHON
    if not (tree / "convert_hf_to_gguf.py").is_file() or not py.is_file():
        raise GgufUnavailable(f"no llama.cpp converter at {tree} or server at {py}: "
                              "bash scripts/install.sh --llama-cpp")
    if source_gguf is not None:
        _run([str(py), "-c", QUANTIZE, str(source_gguf), str(out_file), str(FTYPES[gguf_type]), "requantize"],
             "llama_model_quantize")
        return
    f16 = out_file.with_name("f16.gguf")
    site = str((root / paths.CONVERTER_SITE).resolve())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))}
    _run([sys.executable, str(tree / "convert_hf_to_gguf.py"), str(src), "--outtype", "f16", "--outfile", str(f16)],
         "convert_hf_to_gguf.py", env)
    if gguf_type == "F16":
        f16.rename(out_file)
        return
    _run([str(py), "-c", QUANTIZE, str(f16), str(out_file), str(FTYPES[gguf_type]), "from-f16"],
         "llama_model_quantize")
    f16.unlink()


def quantize(tier: schema.Tier, model_source: str, src: Path, out: Path, root: Path = Path(".")) -> dict:
    """Make or locate the tier's GGUF file and record it in `out` (quantize's facts returned)."""
    with io.AtomicDir(out) as tmp:
        if tier.gguf_type is not None:
            made = tmp / f"model.{tier.gguf_type}.gguf"
            kind, _, ref = model_source.partition(":")
            from_gguf = sources.embedded_gguf_path(ref) if kind == "embedded" else None
            make(src, tier.gguf_type, made, root, from_gguf)
            # the folder is renamed into place: the reference names where the file will be (from the repo root)
            path = out / made.name
            how = (f"{tier.gguf_type} by llama.cpp's llama_model_quantize, "
                   + (f"requantized from {from_gguf.name}" if from_gguf else "from convert_hf_to_gguf.py's F16"))
        else:
            made = path = source_file(tier, model_source, root).resolve()
            how = f"published file {tier.gguf_file}"
        ref = {"path": str(path), "file_type": gguf_bill.file_type(made),
               "bill": gguf_bill.read(made)}
        io.atomic_write_json(tmp / paths.GGUF_REF, ref)
    return {"method": tier.method, "label": tier.label, "scheme": f"GGUF {ref['file_type']}: {how}", "gguf": ref}
