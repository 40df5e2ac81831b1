"""What the report is made of: the run's header and one model's section. Built by
pipeline/stages/decide.py, rendered by pipeline/report/markdown.py and exports.py."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.schema import Baseline, FidelityBootstrap, Memory, TargetGpu
from pipeline.scoring.estimators.analysis import KvLength, Read, Regression
from pipeline.scoring.pick.across_pick import Difference, GpuPick
from pipeline.scoring.pick.recommend import Recommendation
from pipeline.scoring.verdict.across import Across
from pipeline.scoring.verdict.rows import Row
from pipeline.scoring.verdict.long_kv import LongKv
from pipeline.scoring.estimators.noise import NoiseFloor
from pipeline.scoring.estimators.sanity import Finding
from pipeline.scoring.planning.planner import Plan
from pipeline.scoring.verdict.retrieval_length import ByLength
from pipeline.scoring.estimators.stats import Flips


@dataclass(frozen=True)
class Header:
    """What the report says about the run as a whole."""
    generated: str                   # UTC time stamp
    kv_scales: dict[str, str]        # KV mode with a quantized cache -> its k/v scale ("1.0", "calibrated")
    baseline: Baseline
    confidence: float                # decision.confidence: of every interval
    fidelity_bootstrap: FidelityBootstrap
    budget: Memory                   # params memory.*: the planner's budget
    gpus: dict[str, TargetGpu]
    hardware_docs: str               # vLLM docs version of the hardware table
    versions: dict[str, str] = field(default_factory=dict)   # evaluate's packages, as a result recorded them
    commit: str = "not recorded"     # the git commit decide ran at (with "+ changes" when the tree differs)
    lock: str = "not recorded"       # sha256 (12 hex) of dvc.lock's sources: commands, params, deps no stage writes


@dataclass(frozen=True)
class KvPair:
    """An fp8 KV mode with calibrated k/v scales and the uncalibrated mode of the same cache dtype."""
    uncalibrated: str
    scale: float                     # the uncalibrated mode's k/v scale (kv_modes.<mode>.scale)
    calibrated: str


@dataclass(frozen=True)
class PlotSpec:
    """results/<path>: quality delta against weight memory, a dashed line at each gated metric's allowed drop."""
    path: str
    title: str
    metrics: list[str]
    limits: dict[str, float]
    model_dtype_kv: list[str]        # KV modes that store the cache in the model's dtype (round markers)


@dataclass
class ModelReport:
    name: str
    source: str
    rows: list[Row]
    recommendation: Recommendation
    num_samples: dict[str, int]
    flips: dict[str, dict[str, Flips]] = field(default_factory=dict)          # variant -> task -> flips
    ties: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # variant -> task -> (tied, scored)
    regressions: dict[str, dict[str, list[Regression]]] = field(default_factory=dict)  # variant -> task -> worst
    regression_links: dict[str, str] = field(default_factory=dict)           # variant -> link
    # variant -> task -> the pairs its flips, ties, regressions and deltas by length come from (comparison.read_of)
    reads: dict[str, dict[str, Read]] = field(default_factory=dict)
    kv_length: list[KvLength] = field(default_factory=list)
    plans: dict[str, dict[str, Plan]] = field(default_factory=dict)          # variant -> GPU name -> plan
    gpu_recs: dict[str, Recommendation] = field(default_factory=dict)        # GPU name -> recommendation
    plot: PlotSpec | None = None
    kv_pairs: list[KvPair] = field(default_factory=list)
    min_speed_vs_baseline: float | None = None   # report.min_speed_vs_baseline: the load figures' speed floor
    sanity: list[Finding] = field(default_factory=list)   # the baseline's own outputs, before any verdict
    noise: NoiseFloor | None = None                        # the engine's own noise (stage noise)
    noise_flips: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # variant -> task -> (flips, inside)
    long_kv: list[LongKv] = field(default_factory=list)    # quantized KV modes judged by position
    long_tolerance: float | None = None                    # decision.kv_kl_tolerance; None: no long-context records
    retrieval: list[ByLength] = field(default_factory=list)  # the retrieval suite's lengths, per variant
    repaired: dict[str, str | None] = field(default_factory=dict)  # repaired tier -> its uniform tier (params)
    kv_barred: set[tuple[str, str]] = field(default_factory=set)  # (tier, kv) no pick may take (decide_picks.kv_barred)


@dataclass(frozen=True)
class AcrossReport:
    """The decision across models (decision.baseline.model): every row against the reference, the pick
    per target GPU with its `vllm serve` line, the paired differences along each GPU's passing run."""
    across: Across
    picks: dict[str, GpuPick]                        # GPU name -> its pick across models
    commands: dict[str, str]                         # GPU name -> the pick's `vllm serve` line
    differences: dict[str, list[Difference]]         # GPU name -> consecutive passing candidates
    formats: dict[str, str]                          # model -> its prompt format (chat template, BOS)
    confidence: float                                # decision.confidence
    limits: dict[str, float] = field(default_factory=dict)   # gated metric -> allowed drop vs the reference
    plot: str | None = None                          # the plot, relative to results/
