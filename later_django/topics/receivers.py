"""Signal receivers for topics: register declared topics after ``migrate``."""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models.signals import post_migrate
from django.dispatch import receiver

LABEL = "later"


@receiver(post_migrate, dispatch_uid="later_django.topics.register_after_migrate")
def register_after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """Store every Later backend's topics in the database just migrated.

    Raises TopicLayoutMismatch, failing ``migrate``, when a stored partition
    count differs from the configured one.
    """
    if getattr(sender, "label", None) != LABEL:
        return
    from ..options import valid_options
    from .registry import register_topics

    if "later_topic" not in connections[using].introspection.table_names():
        return  # migrated backwards past the table
    for later in valid_options():
        if later.database == using:
            register_topics(later)
