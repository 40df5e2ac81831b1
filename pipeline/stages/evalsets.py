"""Stage `evalsets`: download the public eval sets named in params.yaml (eval.tasks.*.data =
sacrebleu:... or hf:...) into artifacts/eval_data/, and check them like local JSONL. Local sets
are only checked. Runs before any model work, so a wrong column name costs seconds.

    python -m pipeline.stages.evalsets
"""
from __future__ import annotations

import sys
from pathlib import Path

from pipeline import io, paths
from pipeline.domain.sets import public_sets, registry, tasks
from pipeline.schema import ConfigError
from pipeline.stages import runner

MANIFEST = paths.EVAL_DATA_MANIFEST


def fetch(name: str, data: str, root: Path = Path("."), load_dataset=None) -> int:
    """Download one public set to its local copy (atomically); the number of rows."""
    spec = public_sets.parse(f"eval.tasks.{name}.data", data)
    try:
        text = public_sets.to_jsonl(public_sets.rows(spec, load_dataset))
    except Exception as e:  # noqa: BLE001 - any download/parse failure becomes one named line
        raise ConfigError(f"eval.tasks.{name}.data: could not fetch {data!r}: "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if not text:
        raise ConfigError(f"eval.tasks.{name}.data: {data!r} has no rows")
    io.atomic_write_text(root / paths.eval_data(name), text)
    return text.count("\n")


def prefetch(name: str, task) -> None:
    """Build an lm-eval registry task once here, with the network, so its dataset lands in the Hugging
    Face datasets cache; the evaluate stages then read it from there offline (HF_DATASETS_OFFLINE=1)."""
    try:
        loaded = registry.load(name, task)
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - any download/build failure becomes one named line
        raise ConfigError(f"eval.tasks.{name}.lm_eval: could not load {task.lm_eval!r}: "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    print(f"qtier: eval set {name}: lm-eval task {task.lm_eval} ready ({len(loaded.eval_docs)} docs)")


@runner.stage_main("evalsets", offline=False)
def main(st: runner.Stage) -> None:
    params = st.params
    fetched = []
    manifest = io.read_json(MANIFEST) if MANIFEST.is_file() else {}
    wanted = {n: t.data for n, t in params.eval.tasks.items() if public_sets.is_public(t.data)}
    for gone in set(manifest) - set(wanted):
        paths.eval_data(gone).unlink(missing_ok=True)
        del manifest[gone]
    io.atomic_write_json(MANIFEST, manifest)
    try:
        for name, task in params.eval.tasks.items():
            if name in wanted and (manifest.get(name) != task.data or not paths.eval_data(name).is_file()):
                n = fetch(name, task.data)
                print(f"qtier: eval set {name}: {n} rows from {task.data}")
                fetched.append(f"{name}: {n} rows")
                manifest[name] = task.data
                # the copy is recorded before it is checked: a mapping error must not cost a new download
                io.atomic_write_json(MANIFEST, manifest)
            if task.kind == "lm_eval":
                prefetch(name, task)
            tasks.check_data(name, task, Path("."), paths.eval_data(name) if name in wanted else None)
    except ConfigError as e:
        print(f"qtier: error: {e}", file=sys.stderr)
        sys.exit(2)
    st.done("ok", "fetched " + ", ".join(fetched) if fetched else None)


if __name__ == "__main__":
    main()
