"""params.yaml, fully checked: the schema's own checks (pipeline/schema/) composed with the checks
that need files, data or the model's geometry, each of which lives with its domain.

    python -m pipeline.config            # validate params.yaml, print the variants and the planned power

Every error is one line naming the key, file or value; exit code 2. No model is loaded.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from pipeline import paths, schema
from pipeline.domain.hardware import gpus
from pipeline.domain.model import bos, chat, kv_check, sources
from pipeline.domain.sets import calibration, fidelity_set, long_texts, metric_registry, probe_sets, tasks
from pipeline.domain.sets.probe_sets import CHAT_TOKENS
from pipeline.domain.sets.metrics import metric_id
from pipeline.engines import Unsupported
from pipeline.engines.endpoint import backend as endpoint
from pipeline.quant import recipes
from pipeline.schema import PARAMS_FILE, ConfigError, Params, Task, near
from pipeline.schema import load as load_schema
from pipeline.schema import yaml_io
from pipeline.scoring.estimators import strata
from pipeline.scoring.planning import power
from pipeline.scoring.verdict import sequential

__all__ = ["ConfigError", "Params", "check", "load", "load_or_exit"]


def check(p: Params, root: Path) -> None:
    """Every check that needs something besides params.yaml itself."""
    kinds = list(gpus.table().kinds)
    for name, m in p.models.items():
        sources.check_source(f"models.{name}.source", m.source, root)
        folder = sources.local_folder(m.source, root)
        if folder is not None:      # embedded and hub sources: prepare resolves it, still before quantize
            where = m.source.partition(":")[2]
            chat.resolve_folder(name, m.apply_chat_template, folder, where)
            bos.check_folder(name, m.add_bos_token, folder, where)
    check_tiers(p, root, kinds)
    kv_check.check(p, root)
    if not (root / p.calibration.path).is_file():
        raise ConfigError(f"calibration.path: file not found: {p.calibration.path}")
    calibration.check(p, root)
    check_tasks(p, root)
    check_probe_sets(p, root)
    if p.eval.fidelity is not None:
        fidelity_set.texts(p.eval.fidelity, root)
    if p.eval.long_context is not None:
        lc = p.eval.long_context
        long_texts.texts(lc.data, lc.field, lc.texts, root)
    check_group_sizes(p, root)


def check_tiers(p: Params, root: Path, kinds: list[str]) -> None:
    """Each tier's recipe, published checkpoint, hardware kind and an endpoint's API key variable."""
    for name, t in p.tiers.items():
        if t.recipe and not (root / t.recipe).is_file():
            raise ConfigError(f"tiers.{name}.recipe: file not found: {t.recipe}")
        kind, _, folder = (t.checkpoint or "").partition(":")
        if kind == "local" and not (root / folder / "config.json").is_file():
            raise ConfigError(f"tiers.{name}.checkpoint: no config.json in {folder}"
                              + ("" if (root / folder).is_dir() else " (folder not found)"))
        if t.recipe:
            try:
                recipes.check_tier_recipe(t, f"tiers.{name}", root)
            except recipes.RecipeError as e:
                raise ConfigError(str(e)) from None
        if t.hardware is not None and t.hardware not in kinds:
            raise ConfigError(f"tiers.{name}.hardware: unknown kind {t.hardware!r}; known: {', '.join(kinds)}")
        if t.method == "endpoint":      # else each of its rows would be refused only after the rest of the run
            try:
                endpoint.api_key(t.api_key_env, name)
            except Unsupported as e:
                raise ConfigError(str(e)) from None


def check_tasks(p: Params, root: Path) -> None:
    """Each task's files or lm-eval name, its data, and its own tolerances / min_baseline: every
    metric named there must be one the task reports."""
    seen: dict[str, str] = {}
    for name, task in p.eval.tasks.items():
        if task.kind == "lm_eval":
            if task.lm_eval in seen:
                raise ConfigError(f"eval.tasks.{name}.lm_eval: {task.lm_eval} is already evaluated as "
                                  f"eval.tasks.{seen[task.lm_eval]}")
            seen[task.lm_eval] = name
        tasks.check_files(name, task, root)
        tasks.check_data(name, task, root)
        check_metrics(name, task, root)
        check_fits_vllm(p, name, task, root)
        if task.tolerances or task.min_baseline:
            reported = tasks.declared_metrics(task, root)
            for key, given in (("tolerances", task.tolerances), ("min_baseline", task.min_baseline)):
                for metric in given:
                    if reported and metric not in reported:
                        raise ConfigError(f"eval.tasks.{name}.{key}.{metric}: task {name} does not report "
                                          f"{metric!r}{near(metric, reported)} (it reports: {', '.join(reported)})")


def check_metrics(name: str, task: Task, root: Path) -> None:
    """Each metric a local task's YAML declares is one metric_registry declares: qtier scores a local task
    from its rows, by the registry's per-row score and aggregate (a registry task's are lm-eval's own)."""
    if task.kind == "lm_eval":
        return
    for metric in tasks.declared_metrics(task, root):
        if not metric_registry.declared(metric):
            raise ConfigError(f"eval.tasks.{name}.config: {task.config} declares metric {metric!r}, which "
                              f"pipeline/domain/sets/metric_registry.py does not{near(metric, list(metric_registry.METRICS))} "
                              "(declare it there once: kind, per-row score, aggregate, interval)")


def check_probe_sets(p: Params, root: Path) -> None:
    """Each probe set fits each model's context where check can read it (a local folder, an embedded
    GGUF); a hub model's is checked by stage probes once prepare has fetched it."""
    sets = {n: t for n, t in p.eval.tasks.items() if probe_sets.is_probe_set(t.data)}
    for model, m in p.models.items() if sets else ():
        context = (sources.geometry(m.source, root) or {}).get("max_position_embeddings")
        limit, what = probe_sets.room(context, "reference", p.serving.vllm.max_model_len)
        for name, task in sets.items():
            spec = probe_sets.parse(f"eval.tasks.{name}.data", task.data)
            answer = tasks.max_gen_toks(tasks.declared_config(task, root))
            if why := probe_sets.misfit(name, spec, answer, limit, what):
                raise ConfigError(f"models.{model}: {why}")


def check_fits_vllm(p: Params, name: str, task: Task, root: Path) -> None:
    """On vLLM a prompt longer than --max-model-len leaves no room for its answer: lm-eval would cut it
    from the left, and a length the suite states would silently not be the length measured."""
    if p.serving.backend == "reference" or (found := tasks.longest_prompt(task, root)) is None:
        return
    need = found[0] + found[1] + CHAT_TOKENS
    if need > p.serving.vllm.max_model_len:
        raise ConfigError(f"serving.vllm.max_model_len: {p.serving.vllm.max_model_len} is too short for "
                          f"eval.tasks.{name} ({found[0]:,}-token prompts, {found[1]} answer tokens and a chat "
                          f"template: at least {need}); raise it or drop the task")


def check_group_sizes(p: Params, root: Path) -> None:
    """Group sizes against each model's Linear widths, read from the model source itself (a local
    folder's config.json, the embedded GGUF's header). A hub model's geometry is unknown offline:
    its quantize stage checks it and records a failed tier naming the key."""
    for name, m in p.models.items():
        geometry = sources.geometry(m.source, root)
        if geometry is None:
            continue
        for tname, t in p.tiers.items():
            try:
                recipes.pick_group_size(t, geometry, f"tiers.{tname}")
            except recipes.RecipeError as e:
                raise ConfigError(f"{e} (model {name})") from None


# Keys with a default that dvc.yaml names one by one (evaluate, baseline, noise, fidelity_base read them,
# decide reads the rest of `decision`): DVC stops with "missing params" on a key params.yaml leaves out,
# so check asks for them written out. Narrow, so that decision.baseline.model re-runs decide only.
DVC_TRACKED = ("decision.baseline.kv", "decision.min_baseline", "decision.confidence")


def check_tracked_keys(path: Path) -> None:
    """Each of DVC_TRACKED present in the file itself (a default is not enough for DVC)."""
    raw = yaml_io.safe_load(path.read_text(encoding="utf-8")) or {}
    for key in DVC_TRACKED:
        node = raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                raise ConfigError(f"{key}: write it out in params.yaml (dvc.yaml tracks it as a params key, and "
                                  "DVC stops on one the file leaves out; the default would be "
                                  f"{default_of(key)})")


def default_of(key: str) -> str:
    return {"decision.baseline.kv": "auto", "decision.min_baseline": "{}",
            "decision.confidence": "0.95"}[key]


def load(path: str | Path = PARAMS_FILE) -> Params:
    path = Path(path)
    params = load_schema(path)
    check_tracked_keys(path)
    check(params, path.parent)
    return params


def load_or_exit(path: str | Path = PARAMS_FILE) -> Params:
    return schema.load_or_exit(path, loader=load)


def planned_power(p: Params, root: Path) -> list[str]:
    """For each task, the samples this run will score and, per gated metric, the minimum detectable
    drop at that n and the n for 80% power at the tolerance (pipeline/scoring/planning/power.py), from the
    SDs the last run observed (results/decision.json) when there is one."""
    confidence = p.decision.confidence
    last_file = root / paths.DECISION_JSON
    last = power.last_run(json.loads(last_file.read_text())) if last_file.is_file() else None
    if last is None:
        source = "no previous run: SD unknown"
    elif not last.sd:
        source = f"last run ({last.generated}) predates power figures: SD unknown"
    else:
        source = f"SD from last run ({last.generated}), the median over its variants"
    lines = [f"planned power (80%, one-sided alpha {(1 - confidence) / 2:g}; {source}):"]
    for name, task in p.eval.tasks.items():
        n = tasks.planned_samples(task, root)
        gated = [m for m in tasks.declared_metrics(task, root) if p.gate(metric_id(name, m)).tolerance is not None]
        lines.append(f"  {name}: limit {task.limit}, {'unknown' if n is None else n} samples"
                     + ("" if gated else "; report only (no tolerance): " + probed_by(p) + " runs them all "
                                         "(eval.sequential.probes)"))
        for metric in gated:
            lines += (f"    {metric}: " + metric_power(p, metric_id(name, metric), n, last, confidence)).split("\n")
    return lines


def probed_by(p: Params) -> str:
    """Which variants run the report-only tasks."""
    seq = p.eval.sequential
    return "every variant that can still pass" if seq is not None and seq.probes == "passable" else "every variant"


def metric_power(p: Params, metric: str, n: int | None, last: power.LastRun | None, confidence: float) -> str:
    """`metric`: `<task>/<metric>`, gated (it has a tolerance)."""
    tol = p.gate(metric).tolerance
    base = last.baseline.get(metric) if last else None
    if tol.abs is None and base is None:
        return f"tolerance {tol.rel:g} x baseline, baseline score unknown"
    limit = tol.allowed_drop(base or 0.0)
    sd = last.sd.get(metric) if last else None
    reads = planned_reads(p, metric.split("/")[0], n, last)
    n_read = reads[0][-1] if reads else n           # a stratified read's SD is in items read (power.py)
    if sd is None:
        per_sd = "" if n is None else f" (MDD at n={n_read} = {power.min_detectable_drop(1.0, n_read, confidence):.2f} x SD)"
        return f"tolerance {limit:.2f}, SD unknown{per_sd}"
    mdd = "–" if n is None else f"{power.min_detectable_drop(sd, n_read, confidence):.1f} at n={n_read}"
    n80 = power.samples_for_power(sd, limit, confidence)
    text = (f"tolerance {limit:.2f}, SD {sd:.1f} -> MDD {mdd}; "
            f"n for 80% power: {'–' if n80 is None else f'{n80:,}'}")
    if reads is None or sd <= 0:
        return text
    sizes, fractions, how = reads
    design = sequential.Design.of(fractions, confidence)
    unchanged = sequential.expected_samples(sizes, design.critical, limit * n_read ** 0.5 / sd)
    at_margin = sequential.expected_samples(sizes, design.critical, 0.0)
    return (text + f"\n      in looks {'/'.join(map(str, sizes))}{how}: expected samples {unchanged[0]:.0f} if unchanged "
            f"(passes {unchanged[1]:.0%}), {at_margin[0]:.0f} at the margin; at most {n_read}")


def planned_reads(p: Params, task: str, n: int | None,
                  last: power.LastRun | None) -> tuple[list[int], list[float], str] | None:
    """(items read by each look, the looks' fractions, how they were planned) of a task capped at `n`
    under eval.sequential; None without looks. A task the last run read in strata (its looks record) is
    planned in those strata, as evaluate reads it (strata.look_reads on the baseline's pool: stratified.plan),
    while eval.sequential.strata's margin and the cap are the ones that pool was drawn at; any other by
    sequential.look_sizes."""
    seq = p.eval.sequential
    if seq is None or not n:
        return None
    kept = last.strata.get(task) if last else None
    if seq.strata is not None and kept and kept[0] == seq.strata.below and sum(kept[1]) == n:
        fractions, reads = strata.look_reads(kept[1], seq.strata.share, seq.looks)
        pool = "/".join(map(str, kept[1]))
        return [sum(r) for r in reads], fractions, f" (in strata of the last run's baseline margins, pool {pool})"
    sizes = sequential.look_sizes(seq.looks, n)
    return sizes, [s / n for s in sizes], ""


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else PARAMS_FILE)
    p = load_or_exit(path)
    for v in p.variants():
        print("-".join(v))
    print("\n".join(["", *planned_power(p, path.parent)]))


if __name__ == "__main__":
    main()
