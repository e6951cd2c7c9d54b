"""Pause, resume and run now on the schedules page: a confirmation page, then a POST.

Each calls ``later_django.schedules.control``, which locks the schedule's row,
so an action never races a worker firing the same schedule.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from ..exceptions import LaterError
from ..jobs import backend_for
from ..schedules import control
from ..schedules.store import read_one
from . import permissions
from .links import Links
from .scope import resolve
from .views import page, viewer_required

# Every dashboard action is logged on one logger, whichever page it came from.
logger = logging.getLogger("later_django.dashboard.actions")

ACTIONS = ("pause", "resume", "run")


@require_http_methods(["GET", "POST"])
@viewer_required
def action(request: HttpRequest, site: AdminSite, identifier: str, action: str) -> HttpResponse:
    """Confirm on GET; act on POST, then go back to the schedule's row."""
    if action not in ACTIONS:
        raise Http404(f"Action {action!r} is unknown; actions are pause, resume and run.")
    if not permissions.can_change(request.user):
        raise PermissionDenied(f"To {action} a schedule you need the 'Can change job' permission.")
    scope = resolve(request)
    links = Links(site, scope)
    back_url = links.url("schedules") + f"#schedule-{identifier}"
    found = read_one(scope.namespace, identifier, using=scope.database)
    if found is None:
        raise Http404(f"No schedule {identifier!r} in namespace {scope.namespace!r}.")
    if request.method == "POST":
        try:
            done = _perform(scope.namespace, scope.database, identifier, action)
        except LaterError as e:  # gone meanwhile, busy, or its stored call unusable
            messages.error(request, str(e))
        else:
            messages.success(request, done)
            logger.info(
                "dashboard action=%s schedule=%s namespace=%s user=%s",
                action,
                identifier,
                scope.namespace,
                request.user.get_username(),
            )
        return redirect(back_url)
    return page(
        request,
        site,
        scope,
        "schedule_confirm.html",
        f"{'Run now' if action == 'run' else action.capitalize()}: schedule {identifier}?",
        action=action,
        schedule=found,
        post_url=links.url("schedule_action", action, identifier),
        back_url=back_url,
    )


def _perform(namespace: str, database: str, identifier: str, action: str) -> str:
    if action == "pause":
        control.pause(namespace, identifier, using=database)
        return f"Schedule {identifier} paused; it does not fire until it is resumed."
    if action == "resume":
        resumed = control.resume(namespace, identifier, using=database)
        following = f"{resumed.next_run_at:%Y-%m-%d %H:%M:%S}"
        return f"Schedule {identifier} resumed; it next runs at {following}."
    job_id = control.run_now(backend_for(namespace), identifier)
    return f"Schedule {identifier} ran now: job {job_id} enqueued."
