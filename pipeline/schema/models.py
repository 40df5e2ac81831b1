"""What is quantized and how: the model sources, the tiers, the KV cache modes, the calibration set."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pipeline.schema import gguf
from pipeline.schema.errors import FieldError, near

METHODS = ("baseline", "rtn", "gptq", "awq", "smoothquant-gptq", "bnb-int8", "bnb-nf4", "published", "endpoint",
           "gguf")
RECIPE_METHODS = ("rtn", "gptq", "awq", "smoothquant-gptq")
CALIBRATED_METHODS = ("gptq", "awq", "smoothquant-gptq")
BNB_METHODS = ("bnb-int8", "bnb-nf4")
PER_TENSOR_SCALED = ("fp8", "fp8_e4m3")      # what stage kvscales calibrates


@dataclass(frozen=True)
class Model:
    source: str
    trust_remote_code: bool = False
    dtype: Literal["auto", "float16", "bfloat16"] = "auto"
    apply_chat_template: Literal["auto"] | bool = "auto"
    add_bos_token: Literal["auto"] | bool = "auto"
    check_tokenizer: bool = True


def check_search(r, ends: str) -> None:
    """A repair search's bounds, one rule for a tier's (Repair) and a KV mode's (KvRepair); `ends`: the
    two candidates every search holds, named in the message."""
    if r.max_kl <= 0:
        raise FieldError("max_kl", f"must be positive, got {r.max_kl}")
    if r.max_candidates < 2:
        raise FieldError("max_candidates", f"at least 2 ({ends}), got {r.max_candidates}")
    if r.texts < 1 or r.max_len < 2:
        raise FieldError("texts" if r.texts < 1 else "max_len", "must be positive (max_len >= 2)")


@dataclass(frozen=True)
class Repair:
    promote_bits: Literal[8, 16] = 8
    max_kl: float = 0.01
    max_candidates: int = 10
    texts: int = 8
    max_len: int = 128

    def __post_init__(self) -> None:
        check_search(self, "the uniform tier and every group promoted")


@dataclass(frozen=True)
class Tier:
    method: str
    label: str = ""
    recipe: str | None = None
    weight_bits: int | None = None
    group_size: int | Literal["auto"] | None = None
    symmetric: bool = True
    ignore: list[str] = field(default_factory=lambda: ["lm_head"])
    group_size_candidates: list[int] = field(default_factory=lambda: [128, 64, 32])
    hardware: str | None = None
    bnb_options: dict[str, str | int | float | bool] = field(default_factory=dict)
    checkpoint: str | None = None
    revision: str | None = None
    model: str | None = None
    base_url: str | None = None
    served_model: str | None = None
    api_key_env: str | None = None
    gguf_type: str | None = None
    gguf_file: str | None = None
    repair: Repair | None = None

    # keys no longer read, each rejected with its reason (pipeline/schema/builder.py)
    RETIRED = {"activations": "removed: a tier's activation quantization is implied by its recipe "
                              "(its input_activations)"}

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise FieldError("method", f"unknown method {self.method!r}{near(self.method, METHODS)}; "
                                       f"known: {', '.join(METHODS)}")
        if self.method in RECIPE_METHODS:
            if not self.recipe:
                raise FieldError("recipe", f"method {self.method!r} needs a recipe file")
            if self.weight_bits not in (4, 8):
                raise FieldError("weight_bits", f"expected 4 or 8, got {self.weight_bits!r}")
        if self.method in BNB_METHODS and self.recipe:
            raise FieldError("recipe", "bitsandbytes tiers quantize at load time and take no recipe")
        if self.method == "published":
            if not self.checkpoint or self.checkpoint.partition(":")[0] not in ("local", "hub") \
                    or not self.checkpoint.partition(":")[2]:
                raise FieldError("checkpoint", f"method 'published' needs local:<dir> or hub:<repo>, "
                                               f"got {self.checkpoint!r}")
            for key in ("recipe", "weight_bits"):
                if getattr(self, key) is not None:
                    raise FieldError(key, "a published checkpoint is not re-quantized: its config.json "
                                          "says how it is quantized")
            if self.bnb_options:
                raise FieldError("bnb_options", "a published checkpoint is not re-quantized")
        elif self.checkpoint is not None or self.revision is not None:
            key = "checkpoint" if self.checkpoint is not None else "revision"
            raise FieldError(key, "only a tier with method 'published' names a checkpoint and its revision")
        if self.model is not None and self.method not in ("published", "endpoint"):
            raise FieldError("model", "only a published checkpoint or an endpoint names the model it serves")
        if self.method == "endpoint":
            self._check_endpoint()
        else:
            for key in ("base_url", "served_model", "api_key_env"):
                if getattr(self, key) is not None:
                    raise FieldError(key, "only a tier with method 'endpoint' names a server")
        if self.method == "gguf":
            gguf.check_tier(self.gguf_type, self.gguf_file)
            for key in ("recipe", "weight_bits"):
                if getattr(self, key) is not None:
                    raise FieldError(key, "a GGUF tier's weights are its gguf_type's (or its file's)")
        else:
            for key in ("gguf_type", "gguf_file"):
                if getattr(self, key) is not None:
                    raise FieldError(key, "only a tier with method 'gguf' names a GGUF type or file")
        if self.revision is not None and not (self.checkpoint or "").startswith("hub:"):
            raise FieldError("revision", "only a hub: checkpoint has a revision")
        if self.method != "baseline" and self.hardware is None:
            raise FieldError("hardware", "required: which vLLM kernel family serves this tier "
                                         "(a kind in pipeline/data/vllm_hardware.yaml)")
        if self.repair is not None and (self.method not in RECIPE_METHODS or self.weight_bits is None
                                        or self.weight_bits >= self.repair.promote_bits):
            raise FieldError("repair", f"needs a recipe method ({', '.join(RECIPE_METHODS)}) with weight_bits "
                                       f"below repair.promote_bits ({self.repair.promote_bits})")
        if isinstance(self.group_size, int) and self.group_size <= 0:
            raise FieldError("group_size", f"must be positive, got {self.group_size}")

    def _check_endpoint(self) -> None:
        url = self.base_url or ""
        if not url.startswith(("http://", "https://")) or url.rstrip("/").endswith("/v1"):
            raise FieldError("base_url", f"method 'endpoint' needs the server's http(s)://host:port (without /v1), "
                                         f"got {self.base_url!r}")
        if not self.served_model:
            raise FieldError("served_model", "method 'endpoint' needs the model name the server answers to")
        if self.api_key_env is not None and not self.api_key_env.replace("_", "").isalnum():
            raise FieldError("api_key_env", f"the name of an environment variable, got {self.api_key_env!r} "
                                            "(the key itself never goes in params.yaml)")
        for key in ("recipe", "weight_bits"):
            if getattr(self, key) is not None:
                raise FieldError(key, "an endpoint is served as it is: its server says how it is quantized")
        if self.bnb_options:
            raise FieldError("bnb_options", "an endpoint is served as it is")


@dataclass(frozen=True)
class KvRepair:
    max_kl: float = 0.01
    data: Literal["calibration", "long_context"] = "calibration"
    texts: int = 8
    max_len: int = 512
    max_candidates: int = 10

    def __post_init__(self) -> None:
        check_search(self, "no layer kept and every layer kept")


@dataclass(frozen=True)
class KvMode:
    cache_dtype: str
    scale: float | Literal["calibrated"] = 1.0
    skip_layers: list[int] = field(default_factory=list)
    repair: KvRepair | None = None

    @property
    def calibrated(self) -> bool:
        return self.scale == "calibrated"

    def __post_init__(self) -> None:
        if not self.cache_dtype or not self.cache_dtype.replace("_", "").isalnum():
            raise FieldError("cache_dtype", f"{self.cache_dtype!r} is not a KV cache dtype name")
        if self.calibrated:
            if self.cache_dtype == "auto":
                raise FieldError("scale", "calibrated scales need a quantized cache_dtype (fp8_e4m3), not auto")
            if self.cache_dtype not in PER_TENSOR_SCALED:
                raise FieldError("scale", f"stage kvscales calibrates fp8_e4m3's per-layer scales, not "
                                          f"{self.cache_dtype}'s")
        elif self.scale <= 0:
            raise FieldError("scale", f"must be positive or 'calibrated', got {self.scale}")
        if self.skip_layers and self.cache_dtype == "auto":
            raise FieldError("skip_layers", "an auto cache quantizes no layer to skip")
        bad = [i for i in self.skip_layers if i < 0]
        if bad:
            raise FieldError("skip_layers", f"layer indices count from 0, got {bad[0]}")
        if self.repair is not None:
            if self.cache_dtype == "auto":
                raise FieldError("repair", "an auto cache quantizes no layer: nothing to keep in full precision")
            if self.skip_layers:
                raise FieldError("skip_layers", "a repaired mode's layers are chosen by stage kvscales: "
                                                "give skip_layers or repair, not both")
            if self.calibrated:
                raise FieldError("repair", "a repaired mode ranks layers at scale 1.0: not with calibrated scales")


@dataclass(frozen=True)
class Calibration:
    path: str
    text_field: str = "text"
    num_samples: int = 32
    max_seq_len: int = 256

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise FieldError("num_samples", f"must be >= 1, got {self.num_samples}")
        if self.max_seq_len < 8:
            raise FieldError("max_seq_len", f"must be >= 8, got {self.max_seq_len}")
