"""Patterns for ``pytest.raises(match=...)`` built from plain message text, and version marks."""

import re

import django
import pytest

# Task pickling by path and the decorator's run_after refusal came with Django 6.1;
# Django 6.0 and the django-tasks backport (Django 5.2) have neither.
since_django_6_1 = pytest.mark.skipif(
    django.VERSION < (6, 1), reason="a Django 6.1 behaviour that this Django does not have"
)


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def starting(message: str) -> str:
    return f"^{re.escape(message)}"
