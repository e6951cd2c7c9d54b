"""Who may see the dashboard and who may act on jobs.

The job model's ordinary admin permissions decide: "Can view job" (or "Can
change job", which implies it) opens every dashboard page, "Can change job"
allows retry and cancel (and the triage desk's and the schedules page's
actions), "Can delete job" allows delete. The admin itself
already requires an active staff account.
"""

from __future__ import annotations

from typing import Any

VIEW = "later.view_jobindexrow"
CHANGE = "later.change_jobindexrow"
DELETE = "later.delete_jobindexrow"

ACTION_PERMISSIONS = {"retry": CHANGE, "cancel": CHANGE, "delete": DELETE}


def can_view(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and (user.has_perm(VIEW) or user.has_perm(CHANGE)))


def can(user: Any, action: str) -> bool:
    return can_view(user) and bool(user.has_perm(ACTION_PERMISSIONS[action]))


def can_change(user: Any) -> bool:
    """Whether ``user`` may act on partitions and schedules: "Can change job"."""
    return can_view(user) and bool(user.has_perm(CHANGE))


def allowed_actions(user: Any) -> set[str]:
    return {action for action in ACTION_PERMISSIONS if can(user, action)}
