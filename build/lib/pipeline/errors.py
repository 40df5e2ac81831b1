"""Turning an exception into the one-line reason a decision row carries."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """'Type: message' on one line. Keeps the second line too, where libraries such as pydantic
    put the actual cause ('1 validation error for X' / 'field: Extra inputs are not permitted')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: " + " / ".join(lines[:2])
    return text[:limit]
