"""Where a stage's output goes: all library output (Python logging and warnings, and anything written to
file descriptors 1 and 2, so C extensions and child processes too) to one log file; the terminal keeps
what a user reads: the stage's own line (pipeline/stages/runner.py) and a progress bar.

    with runlog.capture(Path("logs/x.log"), "x") as console:   # console: the terminal as it was
        ...                                                    # anything printed lands in the log
        runlog.progress(3, 10, "log-likelihood")              # the bar, callable from any layer
        console.line("x: ok")

On a TTY the bar is one self-overwriting line that also ticks the elapsed time; elsewhere (CI, a file)
it prints at most one line a minute. Outside `capture`, `progress` does nothing (tests, scripts).
Standard library only.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

# Logged by bitsandbytes' int8 matmul at every call: 77,280 copies in one default run. Kept once, counted.
COLLAPSED = {"bitsandbytes.autograd._functions": ("MatMul8bitLt: inputs will be cast from", "bitsandbytes")}
TTY_REDRAW_S = 0.2      # a TTY bar redraws at most this often on progress, and each second for its clock
PLAIN_EVERY_S = 60.0    # not a TTY: at most one progress line a minute
TAIL_BYTES = 65536      # how much of a log's end is searched for its last error line

_bar: Bar | None = None
_owner = 0      # the stage's process: a forked worker inherits _bar, maybe with its lock held, never the bar


def progress(done: int, total: int | None, what: str) -> None:
    """Report long work (`done` of `total` units of `what`) on the bar of the running stage, if any."""
    if _bar is not None and _owner == os.getpid():
        _bar.update(done, total, what)


def duration(seconds: float) -> str:
    """'0.4s', '12.3s', '3m05s', '1h02m'. Pure."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def last_error_line(log: Path, prefix: str = "qtier:") -> str | None:
    """The last line of the log starting with `prefix` (the pipeline's own messages), else its last
    non-empty line (a progress bar's line counts from its last carriage return)."""
    if not log.is_file():
        return None
    with open(log, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
        text = f.read().decode("utf-8", "replace")
    lines = [s for line in text.splitlines() if (s := line.rsplit("\r", 1)[-1].strip())]
    return next((s for s in reversed(lines) if s.startswith(prefix)), lines[-1] if lines else None)


class Collapse(logging.Filter):
    """Lets the first record whose message starts with `prefix` through, counts the others."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix, self.seen = prefix, 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(self.prefix):
            return True
        self.seen += 1
        return self.seen == 1


class Terminal:
    """A stream as the user saw it before capture: a duplicate of its descriptor when it has one (the
    descriptor itself is about to point at the log), else the stream object itself (a test's capture)."""

    def __init__(self, stream: TextIO):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.stream, self.owned = stream, False
        else:
            stream.flush()
            self.stream = open(os.dup(fd), "w", buffering=1, errors="replace",
                               encoding=getattr(stream, "encoding", None) or "utf-8")
            self.owned = True
        try:
            self.tty = self.stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def width(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
        return columns or 80     # a pseudo-terminal may report 0 columns

    def close(self) -> None:
        if self.owned:
            self.stream.close()


class Bar:
    """The progress line of one stage on the terminal."""

    def __init__(self, term: Terminal, label: str, clock=time.monotonic):
        self.term, self.label, self.clock = term, label, clock
        self.t0 = self.last_plain = clock()
        self.last_draw = float("-inf")      # the first report is drawn at once
        self.state: tuple[int, int | None, str] | None = None
        self.shown = False
        self.closed = False     # the stage's own line is out: no more drawing below it
        self.lock = threading.Lock()

    def text(self) -> str:
        elapsed = duration(self.clock() - self.t0)
        if self.state is None:
            return f"{self.label}  {elapsed}"
        done, total, what = self.state
        if not total:
            return f"{self.label}  {elapsed}  {what} {done}"
        filled = int(20 * min(done / total, 1.0))
        return f"{self.label}  {elapsed}  {what} [{'#' * filled}{'.' * (20 - filled)}] {done}/{total}"

    def update(self, done: int, total: int | None, what: str) -> None:
        with self.lock:
            if self.closed:
                return
            self.state = (done, total, what)
            now = self.clock()
            finished = bool(total) and done >= total
            if self.term.tty and (finished or now - self.last_draw >= TTY_REDRAW_S):
                self._draw()
            elif not self.term.tty and now - self.last_plain >= PLAIN_EVERY_S:
                self.last_plain = now
                pct = f" ({100 * done // total}%)" if total else ""
                self.term.write(f"{self.label}: {what} {done}{f'/{total}' if total else ''}{pct}, "
                                f"{duration(now - self.t0)}\n")
            if finished:        # a finished step no longer describes what the stage is doing
                self.state = None

    def tick(self) -> None:
        with self.lock:
            if self.term.tty and not self.closed:
                self._draw()

    def _draw(self) -> None:
        self.last_draw = self.clock()
        self.term.write("\r\x1b[K" + self.text()[: self.term.width() - 1])
        self.shown = True

    def clear(self) -> None:
        with self.lock:
            self._clear()

    def _clear(self) -> None:
        if self.shown:
            self.term.write("\r\x1b[K")
            self.shown = False

    def close_with(self, term: Terminal, text: str) -> None:
        """Replace the bar by `text` on `term`, for good (the ticking thread cannot draw in between)."""
        with self.lock:
            self._clear()
            self.closed = True
            term.write(text + "\n")


class Console:
    """The terminal of a captured stage: its own lines on stdout or stderr, below the bar."""

    def __init__(self, out: Terminal, err: Terminal, bar: Bar):
        self.out, self.err, self.bar = out, err, bar

    def line(self, text: str) -> None:
        self.bar.close_with(self.out, text)

    def error(self, text: str) -> None:
        self.bar.close_with(self.err, text)


def _flush_c_stdio() -> None:
    """C stdio buffers written before the restore would otherwise reach the terminal at exit."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _fd_stream(fd: int) -> TextIO:
    """A text stream on descriptor `fd` that never closes it: a logging handler or sink made during the
    stage keeps writing to wherever the descriptor points (the log, then the terminal), never to a
    closed file."""
    return open(fd, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)


@contextmanager
def capture(log: Path, label: str) -> Iterator[Console]:
    """fd 1 and 2, sys.stdout and sys.stderr go to `log` (overwritten) until the block ends."""
    global _bar, _owner
    log.parent.mkdir(parents=True, exist_ok=True)
    out, err = Terminal(sys.stdout), Terminal(sys.stderr)
    console = Console(out, err, Bar(out, label))
    collapse = {name: (Collapse(prefix), what) for name, (prefix, what) in COLLAPSED.items()}
    for name, (flt, _) in collapse.items():
        logging.getLogger(name).addFilter(flt)
    saved_streams = sys.stdout, sys.stderr
    saved_fds = os.dup(1), os.dup(2)
    stop = threading.Event()
    with open(log, "wb", buffering=0) as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        sys.stdout, sys.stderr = _fd_stream(1), _fd_stream(2)
        _bar, _owner = console.bar, os.getpid()
        ticker = threading.Thread(target=_tick, args=(console.bar, stop), daemon=True)
        if out.tty:
            ticker.start()
        try:
            yield console
        finally:
            stop.set()
            if ticker.is_alive():
                ticker.join()
            _bar = None
            console.bar.clear()
            for name, (flt, what) in collapse.items():
                logging.getLogger(name).removeFilter(flt)
                if flt.seen > 1:
                    sys.stderr.write(f"({flt.seen - 1} identical {what} warnings suppressed: {flt.prefix} ...)\n")
            for stream in (sys.stdout, sys.stderr, *saved_streams):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            _flush_c_stdio()
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            for fd in saved_fds:
                os.close(fd)
            sys.stdout, sys.stderr = saved_streams
            out.close()
            err.close()


def _tick(bar: Bar, stop: threading.Event, every_s: float = 1.0) -> None:
    """Redraw the bar (its clock) every `every_s` until `stop`."""
    while not stop.wait(every_s):
        bar.tick()
