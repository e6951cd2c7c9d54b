"""The triage desk: blocked partitions of every topic, and the actions that unblock them.

Each action is two steps like the job actions: a confirmation page, then a POST
with Django's CSRF token that calls ``later_django.engine.triage``. The head a
person saw travels with the request (``?job=``), and the engine refuses when
the partition has moved on since.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from ..engine import triage as engine
from ..exceptions import InvalidTransition, JobNotFound
from ..jobs import get_job
from . import permissions
from . import triage as reads
from .links import Links
from .scope import resolve
from .views import page, viewer_required

# Every dashboard action is logged on one logger, whichever page it came from.
logger = logging.getLogger("later_django.dashboard.actions")

REASON_LENGTH = 500
TITLES = {"skip": "Skip the head", "retry": "Retry the head now", "release": "Release the lease"}


@viewer_required
def desk(request: HttpRequest, site: AdminSite) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    now = timezone.now()
    rows, more = reads.blocked(scope, now)
    can_act = permissions.can_change(request.user)
    return page(
        request,
        site,
        scope,
        "triage.html",
        "Triage desk",
        now=now,
        rows=[
            (
                r,
                links.url("topic", r.topic),
                links.url("partition", r.topic, r.partition),
                links.job(r.job_id),
                [
                    (a, links.url("triage_action", r.topic, r.partition, a, job=r.job_id))
                    for a in r.actions
                ]
                if can_act
                else [],
            )
            for r in rows
        ],
        more=more,
        limit=reads.DESK_LIMIT,
    )


@require_http_methods(["GET", "POST"])
@viewer_required
def action(
    request: HttpRequest, site: AdminSite, topic: str, partition: int, action: str
) -> HttpResponse:
    """Confirm on GET; act on POST, then go back to the desk."""
    if action not in TITLES:
        raise Http404(f"Action {action!r} is unknown; actions are skip, retry and release.")
    if not permissions.can_change(request.user):
        raise PermissionDenied(
            f"To {action} a partition's head you need the 'Can change job' permission."
        )
    scope = resolve(request)
    links = Links(site, scope)
    job_id = request.GET.get("job", "").strip()
    try:
        head = get_job(job_id, namespace=scope.namespace)
    except JobNotFound as e:
        raise Http404(str(e)) from e
    if request.method == "POST":
        user = request.user.get_username()
        try:
            done = _perform(request, scope.namespace, topic, partition, job_id, action, user)
        except (InvalidTransition, JobNotFound) as e:
            messages.error(request, str(e))
        else:
            messages.success(request, done)
            logger.info(
                "dashboard action=%s topic=%s partition=%s job id=%s namespace=%s user=%s",
                action,
                topic,
                partition,
                job_id,
                scope.namespace,
                user,
            )
        return redirect(links.url("triage"))
    return page(
        request,
        site,
        scope,
        "triage_confirm.html",
        f"{TITLES[action]} of {topic}[{partition}]?",
        action=action,
        topic=topic,
        partition=partition,
        head=head,
        head_url=links.job(job_id),
        post_url=links.url("triage_action", topic, partition, action, job=job_id),
        back_url=links.url("triage"),
    )


def _perform(
    request: HttpRequest,
    namespace: str,
    topic: str,
    partition: int,
    job_id: str,
    action: str,
    user: str,
) -> str:
    where = f"{topic}[{partition}]"
    if action == "skip":
        reason = request.POST.get("reason", "").strip()[:REASON_LENGTH]
        reason = reason or f"Skipped as head of {where} from the admin by {user}."
        step = engine.skip_head(namespace, topic, partition, job_id, reason=reason, by=user)
        moved = {
            "advanced": "the partition moved on to its next job",
            "emptied": "the partition has no more jobs",
            "deferred": "the partition moves on at the next claim",
        }[step]
        return f"Job {job_id} skipped and cancelled; {moved}."
    if action == "retry":
        engine.retry_head_now(namespace, topic, partition, job_id, by=user)
        return f"Job {job_id}, head of {where}, may run again now."
    owner = engine.release_lease(namespace, topic, partition, job_id, by=user)
    return (
        f"Lease of {where} released from {owner}; the next worker to claim it raises its "
        "epoch, so the old owner cannot complete the head."
    )
