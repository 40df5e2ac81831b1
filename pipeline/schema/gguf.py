"""GGUF tiers (`method: gguf`): the GGUF weight types qtier can make, and the KV cache types llama.cpp's
server takes. A tier names either a type to convert and quantize to, or a published GGUF file:

    tiers:
      q8:    {method: gguf, gguf_type: Q8_0, hardware: int8-w8a16}
      q4km:  {method: gguf, gguf_type: Q4_K_M, hardware: int4-w4a16}
      q4_1:  {method: gguf, gguf_file: embedded, hardware: int4-w4a16}   # the embedded model's own file

The numbers are llama.cpp's own enums (vendor/llama.cpp/include/llama.h `llama_ftype`, ggml.h `ggml_type`
of llama-cpp-python 0.3.36), passed as they are to `llama_model_quantize` and the server's type_k/type_v.
"""
from __future__ import annotations

from pipeline.schema.errors import FieldError, near

# llama_ftype: what llama_model_quantize writes
FTYPES = {"F16": 1, "BF16": 32, "Q8_0": 7, "Q6_K": 18, "Q5_K_M": 17, "Q5_K_S": 16, "Q5_1": 9, "Q5_0": 8,
          "Q4_K_M": 15, "Q4_K_S": 14, "Q4_1": 3, "Q4_0": 2, "Q3_K_L": 13, "Q3_K_M": 12, "Q3_K_S": 11, "Q2_K": 10}
# the types llama.cpp quantizes only with an importance matrix, made by its llama-imatrix tool: the
# llama-cpp-python wheel ships the library and server, not that tool, so they are refused up front
NEEDS_IMATRIX = ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M",
                 "IQ4_NL", "IQ4_XS", "Q2_K_S")
# ggml_type of the KV cache (the server's type_k / type_v; llama-server's -ctk/-ctv)
KV_TYPES = {"f16": 1, "q8_0": 8, "q5_1": 7, "q5_0": 6, "q4_1": 3, "q4_0": 2}
EMBEDDED_FILE = "embedded"


def check_tier(gguf_type: str | None, gguf_file: str | None) -> None:
    """A gguf tier names exactly one of gguf_type (a type qtier makes) or gguf_file (`embedded`, the
    model's own GGUF, or a path to a .gguf file). FieldError naming the key otherwise. Pure."""
    if (gguf_type is None) == (gguf_file is None):
        raise FieldError("gguf_type", "method 'gguf' needs exactly one of gguf_type (e.g. Q8_0, Q4_K_M: converted "
                                      "and quantized by llama.cpp) or gguf_file (embedded, or a .gguf path)")
    if gguf_type is not None:
        if gguf_type in NEEDS_IMATRIX:
            raise FieldError("gguf_type", f"{gguf_type} needs an importance matrix, which llama.cpp makes with its "
                                          "llama-imatrix tool; llama-cpp-python's wheel does not ship it "
                                          f"(types made here: {', '.join(FTYPES)})")
        if gguf_type not in FTYPES:
            raise FieldError("gguf_type", f"unknown GGUF type {gguf_type!r}{near(gguf_type, tuple(FTYPES))}; "
                                          f"known: {', '.join(FTYPES)}")
    if gguf_file is not None and gguf_file != EMBEDDED_FILE and not gguf_file.endswith(".gguf"):
        raise FieldError("gguf_file", f"'embedded' or a path to a .gguf file, got {gguf_file!r}")
