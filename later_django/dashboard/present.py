"""Small pure helpers that turn stored values into text for the templates."""

from __future__ import annotations

import json
from typing import Any


def pretty(value: Any) -> str:
    """Indented JSON for arguments and return values; repr() for what JSON can't show.

    The template escapes the result like any other text.
    """
    try:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


HEX_PREVIEW_BYTES = 64


def hex_preview(raw: bytes | None) -> str:
    """The first bytes of an undecodable record as hex, with the total length."""
    if raw is None:
        return ""
    shown = raw[:HEX_PREVIEW_BYTES].hex(" ")
    more = " …" if len(raw) > HEX_PREVIEW_BYTES else ""
    return f"{len(raw)} bytes: {shown}{more}"


CALL_LENGTH = 120


def call(args: list[Any], kwargs: dict[str, Any]) -> str:
    """Arguments as a call's parentheses hold them, cut at CALL_LENGTH characters."""
    parts = [json.dumps(a, ensure_ascii=False, default=repr) for a in args]
    parts += [
        f"{k}={json.dumps(v, ensure_ascii=False, default=repr)}" for k, v in sorted(kwargs.items())
    ]
    text = ", ".join(parts)
    return text if len(text) <= CALL_LENGTH else text[: CALL_LENGTH - 1] + "…"


def duration_ms(value: int | float | None) -> str:
    """A wait in milliseconds as the shortest readable figure: 40 ms, 2.5 s, 3 min, 2 h."""
    if value is None:
        return "—"
    if value < 1000:
        return f"{value:.0f} ms"
    seconds = value / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


LONGEST_BIN_MS = 86_400_000


def wait_bound(le_ms: int | None) -> str:
    """A histogram bin's upper bound as a wait: "≤ 250 ms"; the open last bin is "> 24.0 h"."""
    if le_ms is None:
        return "—"
    if le_ms > LONGEST_BIN_MS:
        return f"> {duration_ms(LONGEST_BIN_MS)}"
    return f"≤ {duration_ms(le_ms)}"
