"""Stage baseline@<model>: the baseline (decision.baseline) evaluated to every task's cap, before any
variant, in the tasks' look order (eval.sequential). Each variant's evaluate judges its looks against
these samples; evaluate@<model>-<baseline> copies them, so nothing is evaluated twice.

    python -m pipeline.stages.baseline <model>

Writes results/baseline/<model>/{result.json, samples/<task>.jsonl, ...} as evaluate writes a variant's. No
per-variant time budget applies (serving.vllm.budget): the baseline runs to every cap. On vLLM it then
prints the variants' predicted wall time under the budget its measured speed sizes (stages/look_budget.py).
"""
from __future__ import annotations

from pipeline import paths
from pipeline.domain.result import contract, serving_record
from pipeline.domain.sets import task_rows
from pipeline.schema.params import without_wall_budget
from pipeline.stages import look_budget, runner
from pipeline.stages.evaluation import evaluate, run_stage


@runner.stage_main("baseline", ("model",))
def main(st: runner.Stage) -> None:
    # every variant is judged against the baseline's samples: it runs to every cap, never cut by the
    # per-variant time budget (issue 43)
    model, params = st.args[0], without_wall_budget(st.params)
    tier, kv = params.decision.baseline.tier, params.decision.baseline.kv
    calibrated = params.kv_modes[kv].calibrated
    out_dir = paths.baseline_dir(model)

    def work() -> dict:
        record = serving_record.read(paths.serving_record(model, tier, kv, calibrated))
        return evaluate(params, model, tier, kv, out_dir, paths.serving_checkpoint(model, tier, kv, calibrated),
                        record)
    run_stage(st, model, tier, kv, out_dir, work)
    res = contract.load(out_dir / paths.RESULT_FILE)
    if res.status == "ok" and res.backend == "vllm":
        device = res.serving.device if res.serving else "cpu"
        # after the stage's own line, before any variant starts (the variants depend on this stage)
        rows = task_rows.read_samples(out_dir)     # the strata of a stratified task's looks
        st.report.append(f"predicted: {look_budget.prediction(st.params, model, res, rows, device)}")


if __name__ == "__main__":
    main()
