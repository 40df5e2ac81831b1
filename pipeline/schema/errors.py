"""The schema's error types: one line per problem, starting with the key path."""
from __future__ import annotations

import difflib


class ConfigError(ValueError):
    """A params.yaml problem; the message starts with the key path."""


class FieldError(ConfigError):
    """Raised by a dataclass's own check with the field's name; the builder prefixes the key path."""

    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}" if field else message)


def near(value: str, known: tuple[str, ...] | list[str]) -> str:
    """' (did you mean 'x'?)' for the closest known name, or ''."""
    close = difflib.get_close_matches(value, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
