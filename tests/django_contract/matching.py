"""Patterns for ``pytest.raises(match=...)`` built from plain message text."""

import re


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def starting(message: str) -> str:
    return f"^{re.escape(message)}"
