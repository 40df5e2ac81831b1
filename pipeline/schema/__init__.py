"""The params.yaml schema: typed dataclasses, each checking its own fields, and the YAML loader.

Imports nothing from the rest of the pipeline: everything else imports this. Checks that need files,
data or the model's config live with their domain and are composed in pipeline/config.py.

    python -m pipeline.config            # validate params.yaml (schema + domain checks)

One module per section of params.yaml (models, eval, serving, decision, report, memory), the whole file in
params.py, the generic typed builder in builder.py, the stages' exit policy in cli.py. Everything
public is re-exported here: `from pipeline import schema; schema.Tier`.

The dataclasses carry each key's type, default and checks, no description: what a key means is its one
line in docs/params_doc.yaml, rendered into docs/params.md (tests/test_one_description.py holds this).
"""
from pipeline.schema.builder import PARAMS_FILE, load, parse
from pipeline.schema.cli import load_or_exit
from pipeline.schema.decision import Baseline, Decision, Tolerance
from pipeline.schema.errors import ConfigError, FieldError, near
from pipeline.schema.eval import (LOCAL_ONLY, TASK_KINDS, Eval, Fidelity, Languages, LongContext, Sequential, Strata, Task,
                                  Throughput)
from pipeline.schema.memory import Memory, TargetGpu
from pipeline.schema.models import (BNB_METHODS, CALIBRATED_METHODS, METHODS, RECIPE_METHODS,
                                    Calibration, KvMode, KvRepair, Model, Repair, Tier)
from pipeline.schema.params import NAME_RE, Gate, Params, gate, tolerance_of
from pipeline.schema.report import FidelityBootstrap, Report
from pipeline.schema.traced import replaced
from pipeline.schema.serving import Reference, Serving, Slo, Vllm, VllmBench, VllmBudget

__all__ = [
    "BNB_METHODS", "CALIBRATED_METHODS", "LOCAL_ONLY", "METHODS", "NAME_RE", "PARAMS_FILE",
    "RECIPE_METHODS", "TASK_KINDS", "Baseline", "Calibration", "ConfigError", "Decision", "Eval",
    "FieldError", "Fidelity", "FidelityBootstrap", "Gate", "LongContext", "Sequential", "Strata", "KvMode", "KvRepair", "Languages", "Memory", "Model", "Params", "Reference", "Report", "Serving", "Slo",
    "TargetGpu", "Task", "Throughput", "Tier", "Tolerance", "Vllm", "VllmBench", "VllmBudget", "gate", "load", "tolerance_of",
    "load_or_exit", "near", "parse", "replaced",
]
