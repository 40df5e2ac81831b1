"""The records in result.json that say how a variant was served and measured, typed: where it ran
(`MeasuredOn`), the tokenizer's check, the engine's serving record (`Serving`: what each engine knows,
so most fields are optional), the load test (`Throughput`), next-token fidelity and fidelity by
position (`LongContext`). Parsed by contract.py through records.parse, which names the record
and the key when one is missing, unknown or of the wrong type. Pure.

    from pipeline.domain.result import contract
    res = contract.load(path)
    res.serving.kv_cache_tokens, res.measured_on.cpu.isa, res.long_context.buckets[0].kl_mean
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

OK = "ok"       # the status of a fidelity or long-context record that was measured


@dataclass(frozen=True)
class Cpu:
    model: str
    isa: list[str]
    cores: int | None = None


@dataclass(frozen=True)
class Accelerator:
    name: str
    capability: str          # CUDA/ROCm "major.minor"; another kind "n/a"


@dataclass(frozen=True)
class Engine:
    name: str                # reference | vllm | endpoint
    version: str | None = None


@dataclass(frozen=True)
class MeasuredOn:
    """Where a result was measured (domain/result/provenance.py writes it)."""
    cpu: Cpu
    engine: Engine
    accelerator: Accelerator | None = None
    torch_threads: int | None = None


@dataclass(frozen=True)
class TokenizerCheck:
    """prepare's findings on the tokenizer (domain/model/tokenizer_check.py), and whether the user overrode them."""
    findings: list[str] = field(default_factory=list)
    overridden: bool = False


@dataclass(frozen=True)
class Architecture:
    """The architecture features the reference engine's fast paths meet (engines/reference/arch.py features)."""
    model_type: str
    head_dim: int
    heads: str
    sliding_window: str | None = None               # "<window> tokens on <n> of <layers> layers"
    qk_norm: bool = False
    tied_embeddings: bool = False
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None


@dataclass(frozen=True)
class ServedEngine:
    """What vLLM logged of its configuration."""
    vllm_version: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None


@dataclass(frozen=True)
class Contract:
    """A server's answers to the preflight probes (engines/vllm/preflight.py check builds it; a failure or a
    degenerate answer is appended as the probes find it)."""
    prompt_logprobs: bool = False
    logprob_depth: int = 0
    server_tokens: int | None = None
    tokenizer_tokens: int | None = None
    degenerate: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def loglik_refusal(self) -> str | None:
        """Why log-likelihood tasks cannot be scored through this server, None when they can."""
        return None if self.prompt_logprobs else (
            "the server returns no prompt log-probs with echo: log-likelihood tasks would score every "
            "choice alike (at chance), so they are refused")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DecodeProbe:
    """One greedy request timed before the load test; tokens_per_s None: it did not finish (timeout_s)
    or could not be read (unknown)."""
    tokens: int
    tokens_per_s: float | None = None
    timeout_s: float | None = None
    unknown: str | None = None


@dataclass(frozen=True)
class WallBudget:
    min_decode_tok_s: float | None = None
    max_wall_s: float | None = None


@dataclass(frozen=True)
class KvWrite:
    """How the engine's fp8 cache kernel rounds (engines/vllm/kv_write.py); rounding None: not read (why)."""
    rounding: str | None = None
    why: str | None = None
    values: int | None = None
    as_nearest: float | None = None
    as_truncation: float | None = None
    read: str | None = None


@dataclass(frozen=True)
class Serving:
    """An engine's serving record (the session's info): the reference engine's, vLLM's or an endpoint's."""
    backend: str
    device: str
    compute_dtype: str | None = None
    dtype: str | None = None                          # reference: the weights' dtype as loaded
    torch_threads: int | None = None
    kv_cache: str | None = None
    attention: str | None = None
    architecture: Architecture | None = None
    loglikelihood: str | None = None
    token_dists: str | None = None
    weight_bytes_serving: int | None = None
    arithmetic: str | None = None                     # the noise stage's second arithmetic
    quantized_at_load: str | None = None
    w8a8_gemm_ms: dict[str, float] = field(default_factory=dict)
    w8a8_gemm: str | None = None
    w8a8_arithmetic: str | None = None
    w8a8_layers: int | None = None
    kv_layers_quantized: int | None = None
    shared_prompt_prefix: bool | None = None
    # a server (vLLM, an endpoint)
    startup_s: float | None = None
    first_request_s: float | None = None
    command: str | None = None
    engine: ServedEngine | None = None
    kernels: list[str] = field(default_factory=list)
    num_concurrent: int | None = None
    decode_probe: DecodeProbe | None = None
    contract: Contract | None = None
    budget: WallBudget | None = None
    load_skipped: str | None = None
    kv_scales: str | None = None
    kv_write: KvWrite | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_model_len: int | None = None
    kv_cache_gib: float | None = None
    base_url: str | None = None
    served_model: str | None = None
    max_model_len_from: str | None = None
    prompt_format: str | None = None


@dataclass(frozen=True)
class SloTarget:
    ttft_ms: float
    tpot_ms: float
    percentile: float


@dataclass(frozen=True)
class SloSearch:
    """The largest concurrency meeting the SLO (engines/vllm/slo.py summary); each probe's figures as vLLM
    benchmarked them."""
    slo: SloTarget
    max_concurrency_meeting_slo: int | None = None
    goodput_at_that_concurrency: float | None = None
    stopped: str | None = None
    probes: list[dict[str, float | bool]] = field(default_factory=list)


@dataclass(frozen=True)
class Roofline:
    """Measured decode speed against memory bandwidth / weight bytes (planning/planner.py roofline)."""
    source: str
    decode_tokens_per_s: float | None = None
    bandwidth_gbps: float | None = None
    unknown: str | None = None
    roofline_tokens_per_s: float | None = None
    fraction: float | None = None


@dataclass(frozen=True)
class Throughput:
    """The load test: the reference engine's batched generation, or `vllm bench serve` per concurrency
    (bench: concurrency -> vLLM's figures) and the SLO search; skipped or cut say why not (all of it)."""
    gen_tokens_per_s: float | None = None
    gen_tokens_per_s_at: str | None = None
    batch_size: int | None = None
    new_tokens: int | None = None
    seconds: float | None = None
    decode_probe_tokens_per_s: float | None = None
    bench: dict[str, dict[str, float]] = field(default_factory=dict)
    slo: SloSearch | None = None
    roofline: Roofline | None = None
    skipped: str | None = None
    cut: str | None = None


@dataclass(frozen=True)
class Fidelity:
    """Next-token fidelity against the baseline on the fixed texts (evaluation/fidelity_compare.py);
    status ok, or skipped/failed/unsupported with why. The per-position values are in fidelity.jsonl."""
    status: str
    why: str | None = None
    support: str | None = None
    k: int | None = None
    exact: bool | None = None
    texts: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class Bucket:
    """One bucket of positions lo <= t < hi (scoring/estimators/positions.py Bucket)."""
    lo: int
    hi: int
    n_texts: int
    n_positions: int
    reach: int
    kl_mean: float | None = None
    kl_ci: list[float] | None = None
    top1: float | None = None
    top1_ci: list[float] | None = None


@dataclass(frozen=True)
class PerText:
    """Per text per bucket means (None: the text has no position there)."""
    kl: list[list[float | None]]
    top1: list[list[float | None]]


@dataclass(frozen=True)
class LongContext:
    """Fidelity by position on the long texts (evaluation/longctx.py); status ok, or not with why. path:
    an engine with only its own top-k (the KL a lower bound)."""
    status: str
    why: str | None = None
    texts: int | None = None
    positions: int | None = None
    edges: list[int] = field(default_factory=list)
    k: int | None = None
    model_context: int | None = None
    exact: bool | None = None
    confidence: float | None = None
    buckets: list[Bucket] = field(default_factory=list)
    per_text: PerText | None = None
    path: str | None = None

    @property
    def measured(self) -> bool:
        return self.status == OK
