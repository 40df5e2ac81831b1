"""Stage check: validate params.yaml and every file it names, before DVC touches any output.

    python -m pipeline.stages.check

Every other stage depends on this one, so DVC runs it first whenever params.yaml, the data or the
validation code changed. DVC removes a stage's outputs just before running that stage: a bad edit
therefore stops here, with one line naming the key, and nothing computed is lost. Its output is a
constant marker kept across runs (persist), so a successful check never re-runs anything after it.
"""
from __future__ import annotations

from pipeline import config, io, paths
from pipeline.stages import runner

MARKER_TEXT = "params.yaml passed python -m pipeline.config\n"


@runner.stage_main("check", loader=config.load_or_exit, offline=False)
def main(st: runner.Stage) -> None:
    if not paths.CHECKED.is_file() or paths.CHECKED.read_text() != MARKER_TEXT:
        io.atomic_write_text(paths.CHECKED, MARKER_TEXT)


if __name__ == "__main__":
    main()
