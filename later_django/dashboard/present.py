"""Small pure helpers that turn stored values into text for the templates."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal


def pretty(value: Any) -> str:
    """Indented JSON for arguments and return values; repr() for what JSON can't show.

    The template escapes the result like any other text.
    """
    try:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


VALUE_CHARS = 2_000
TRACEBACK_LINES = 100
TRACEBACK_CHARS = 10_000


@dataclass(frozen=True)
class Clipped:
    """A text as a page shows it, and what was left out of it ("" when nothing was)."""

    text: str
    cut: str = ""


def clip(
    text: str, *, chars: int, lines: int | None = None, keep: Literal["head", "tail"] = "head"
) -> Clipped:
    """Keep at most ``lines`` lines and ``chars`` characters of ``text``, from its start or end.

    A traceback keeps its end, where the exception is; values keep their start.
    """
    shown = text
    if lines is not None:
        parts = shown.splitlines(keepends=True)
        if len(parts) > lines:
            shown = "".join(parts[-lines:] if keep == "tail" else parts[:lines])
    if len(shown) > chars:
        shown = shown[-chars:] if keep == "tail" else shown[:chars]
    if shown == text:
        return Clipped(text)
    where = "first" if keep == "tail" else "last"
    cut_chars = len(text) - len(shown)
    cut_lines = len(text.splitlines()) - len(shown.splitlines())
    if lines is not None and cut_lines > 0:
        return Clipped(
            shown,
            f"The {where} {cut_lines:,} of {len(text.splitlines()):,} lines "
            f"({cut_chars:,} characters) are not shown.",
        )
    return Clipped(shown, f"The {where} {cut_chars:,} of {len(text):,} characters are not shown.")


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
