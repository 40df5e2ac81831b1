"""The prologue and epilogue every stage's main() shares.

    @runner.stage_main("quantize", ("model", "tier"))
    def main(st: runner.Stage) -> None:            # called as main(), as DVC and the tests do
        model, tier = st.args                      # argv checked against a usage line
        params = st.params                         # params.yaml loaded, the variant known in it
        ...                                        # library output goes to logs/quantize@<model>-<tier>.log
        st.done("failed", reason)                  # optional: the default is "ok"

Before the stage's work: the Hugging Face hubs are off unless the stage fetches (offline=False), SIGTERM
unwinds like Ctrl-C (a vLLM server's `finally` stops it), argv must match the stage's arguments, and
params.yaml and the variant's names are checked. During it, all output goes to the stage's log
(pipeline/runlog.py). After it, the terminal gets one line: the stage, its status, its time, and for a
failure the reason and the log's path. A `qtier: ...` message (bad input) reaches stderr alone, as the
stage wrote it; exit codes are the stage's own (an uncaught exception: 1).
"""
from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from pipeline import errors, paths, runlog, schema
from pipeline.schema import traced

# argument name -> the params.yaml section naming it
SECTIONS = {"model": "models", "tier": "tiers", "kv": "kv_modes"}


class Stage:
    def __init__(self, name: str, args: list[str], log: Path):
        self.name, self.args, self.log = name, args, log
        self.params: schema.Params | None = None
        self.status, self.detail = "ok", None
        self.report: list[str] = []
        self.declared = False

    def done(self, status: str = "ok", detail: str | None = None, report: list[str] | None = None) -> None:
        """The stage's outcome (ok | unsupported | failed | ...), a short detail, and lines that follow
        the stage's line on the terminal (decide's summary)."""
        self.status, self.detail, self.report = status, detail, list(report or [])
        self.declared = True

    def line(self, seconds: float) -> str:
        text = f"{self.name}: {self.status} in {runlog.duration(seconds)}"
        if self.status == "failed":
            return text + f" ({self.detail + '; ' if self.detail else ''}log: {self.log})"
        return text + (f" ({self.detail})" if self.detail else "")


def usage(kind: str, argnames: tuple[str, ...]) -> str:
    return f"qtier: usage: python -m pipeline.stages.{kind}" + "".join(f" <{a}>" for a in argnames)


def stage_name(kind: str, args: list[str]) -> str:
    """The stage's name in dvc.yaml: `quantize@<model>-<tier>`."""
    return f"{kind}@{'-'.join(args)}" if args else kind


def unknown_variant(params: schema.Params, argnames: tuple[str, ...], args: list[str]) -> str | None:
    """One line naming the first argument params.yaml does not define, else None. Pure."""
    for name, value in zip(argnames, args):
        section = SECTIONS.get(name)
        if section is not None and value not in getattr(params, section):
            known = ", ".join(getattr(params, section))
            return f"qtier: no variant {'/'.join(args)} in params.yaml: {section} has no {value!r} (it has {known})"
    return None


@contextmanager
def stage(kind: str, argnames: tuple[str, ...] = (), loader: Callable[[], schema.Params] = schema.load_or_exit,
          offline: bool = True) -> Iterator[Stage]:
    # a stage of no arguments reads none (as before; tests call such a main() under pytest's own argv)
    args = sys.argv[1:] if argnames else []
    if len(args) != len(argnames):
        print(usage(kind, argnames), file=sys.stderr)
        raise SystemExit(2)
    if offline:     # never reach a hub from this stage
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    previous = signal.getsignal(signal.SIGTERM)
    errors.unwind_on_sigterm()
    st = Stage(stage_name(kind, args), args, paths.stage_log(stage_name(kind, args)))
    t0 = time.perf_counter()
    written = None
    try:
        with runlog.capture(st.log, st.name) as console:
            try:
                if os.environ.get("QTIER_TRACE"):       # what it reads, for scripts/dvc_deps.py --trace
                    written = trace_reads(st.name, Path(os.environ["QTIER_TRACE"]))
                st.params = loader()
                bad = unknown_variant(st.params, argnames, args)
                if bad:
                    sys.exit(bad)
                if written is not None:
                    traced.start(schema.Params)
                yield st
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)      # the log says why the stage stopped, too
                if code == 0:
                    _finish(console, st, t0)
                    return
                if st.declared:     # the stage said what it did before it exited: say it too
                    _finish(console, st, t0)
                message = runlog.last_error_line(st.log) or f"exit {code}"
                console.error(message if message.startswith("qtier:") else
                              f"{st.name}: failed in {runlog.duration(time.perf_counter() - t0)} "
                              f"({message}; log: {st.log})")
                raise SystemExit(code) from None
            except KeyboardInterrupt:
                console.error(f"{st.name}: interrupted after {runlog.duration(time.perf_counter() - t0)} "
                              f"(log: {st.log})")
                raise
            except Exception as e:  # noqa: BLE001 - an uncaught error: its traceback to the log, one line here
                traceback.print_exc()
                console.error(f"{st.name}: failed in {runlog.duration(time.perf_counter() - t0)} "
                              f"({errors.one_line(e)}; log: {st.log})")
                raise SystemExit(1) from None
            _finish(console, st, t0)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if written is not None:
            written()


def stage_main(kind: str, argnames: tuple[str, ...] = (), loader: Callable[[], schema.Params] = schema.load_or_exit,
               offline: bool = True) -> Callable[[Callable[[Stage], None]], Callable[[], None]]:
    """`body(st)` as the stage's main(): no arguments, run inside `stage(...)`."""
    def wrap(body: Callable[[Stage], None]) -> Callable[[], None]:
        @functools.wraps(body)
        def main() -> None:
            with stage(kind, argnames, loader, offline) as st:
                body(st)
        return main
    return wrap


def _finish(console: runlog.Console, st: Stage, t0: float) -> None:
    console.line(st.line(time.perf_counter() - t0))
    for line in st.report:
        console.line(line)


def trace_reads(stage: str, folder: Path) -> Callable[[], None]:
    """Record the project files read from now on (Python's audit hooks: not a vLLM server's, nor
    safetensors' or tokenizers' native reads) and the params keys once `traced.start` is called (after
    params.yaml is checked: the checks read every key); the returned function writes both to
    `<folder>/<stage>.json` for `python -m scripts.dvc_deps --trace <folder>`."""
    root, files = Path.cwd().resolve(), set()

    def hook(event: str, args: tuple) -> None:
        if event == "open" and not (any(c in args[1] for c in "wax+") if isinstance(args[1], str)
                                    else args[2] & (os.O_WRONLY | os.O_RDWR)):
            path = args[0]
        elif event in ("os.listdir", "os.scandir"):
            path = "." if args[0] is None else args[0]
        else:
            return
        if isinstance(path, int) or not os.path.exists(full := root / os.fsdecode(path)):
            return          # a descriptor, a failed lookup, an import hook's name
        rel = os.path.relpath(full, root).replace(os.sep, "/")
        if not rel.startswith(("..", ".venv", ".git/", ".dvc/")) and "__pycache__" not in rel:
            files.add(rel)

    sys.addaudithook(hook)

    def write() -> None:
        folder.mkdir(parents=True, exist_ok=True)
        record = {"stage": stage, "params": sorted(traced.READ or ()), "reads": sorted(files)}
        (folder / f"{stage}.json").write_text(json.dumps(record, indent=1))
    return write
