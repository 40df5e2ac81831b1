"""Turning an exception into the one-line reason a decision row carries, and SIGTERM into one."""
import signal


def unwind_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so `finally` blocks (a vLLM server's stop) run before the process exits."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


def one_line(exc: BaseException, limit: int = 300) -> str:
    """'Type: message' on one line. Keeps the second line too, where libraries such as pydantic
    put the actual cause ('1 validation error for X' / 'field: Extra inputs are not permitted')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: " + " / ".join(lines[:2])
    return text[:limit]
