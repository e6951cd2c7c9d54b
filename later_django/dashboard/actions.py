"""Retry, cancel and delete: a confirmation page, then a POST that calls the engine.

Cancelling a running job asks it to stop (``cancelling.py``): the message says
so, and the job page shows the request until the job ends.
"""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from .. import jobs as engine
from ..conf import later_settings
from ..engine.cancelling import cancel_by_id
from ..exceptions import InvalidTransition, JobNotFound
from ..states import Stage
from . import permissions
from .links import Links
from .scope import Scope, resolve
from .views import STAGE_ACTIONS, page, viewer_required

logger = logging.getLogger(__name__)

BULK_LIMIT = 100
REASON_LENGTH = 500
VERBS = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}
ASKED = "asked"  # _perform's answer when a running job was asked to stop


def _require(request: HttpRequest, action: str) -> None:
    if action not in permissions.ACTION_PERMISSIONS:
        raise Http404(f"Action {action!r} is unknown; actions are retry, cancel and delete.")
    if not permissions.can(request.user, action):
        needed = permissions.ACTION_PERMISSIONS[action].split(".")[1]
        raise PermissionDenied(f"To {action} jobs you need the {needed!r} permission.")


def _reason(request: HttpRequest) -> str:
    given = request.POST.get("reason", "").strip()[:REASON_LENGTH]
    return given or f"Cancelled from the admin by {request.user.get_username()}."


def _perform(request: HttpRequest, scope: Scope, action: str, job_id: str) -> str | None:
    """Apply one action through the engine; return the refusal message, "asked" when a
    running job was asked to stop, or None.

    The engine's writes are savepoints inside a caller's transaction, so under
    ATOMIC_REQUESTS a refusal leaves the request's transaction usable for the
    next job of a bulk action.
    """
    try:
        stage = _call_engine(request, scope, action, job_id)
    except (InvalidTransition, JobNotFound) as e:
        return str(e)
    logger.info(
        "dashboard action=%s job id=%s namespace=%s user=%s",
        action,
        job_id,
        scope.namespace,
        request.user.get_username(),
    )
    return ASKED if stage == Stage.RUNNING else None


def _asked(count: int) -> str:
    jobs = "job was" if count == 1 else f"{count} jobs were"
    return (
        f"The running {jobs} asked to stop: a task sees context.cancel_requested and is "
        f"interrupted if it runs on {later_settings.cancel_grace:g} s after its worker hears "
        "of the cancel; then it ends cancelled."
    )


def _call_engine(request: HttpRequest, scope: Scope, action: str, job_id: str) -> Stage | None:
    """Call the engine; a cancel returns the stage the job is in afterwards."""
    if action == "retry":
        engine.retry_job(job_id, namespace=scope.namespace)
    elif action == "cancel":
        return cancel_by_id(job_id, namespace=scope.namespace, reason=_reason(request))
    else:
        engine.delete_job(job_id, namespace=scope.namespace)
    return None


@require_http_methods(["GET", "POST"])
@viewer_required
def single(request: HttpRequest, site: AdminSite, job_id: str, action: str) -> HttpResponse:
    """Confirm on GET; act on POST, then go back to the job (or its stage, once deleted)."""
    _require(request, action)
    scope = resolve(request)
    links = Links(site, scope)
    try:
        record = engine.get_job(job_id, namespace=scope.namespace)
    except JobNotFound as e:
        raise Http404(str(e)) from e
    if request.method == "POST":
        refusal = _perform(request, scope, action, job_id)
        if refusal == ASKED:
            messages.success(request, f"Job {job_id}: cancel requested. {_asked(1)}")
        elif refusal:
            messages.error(request, refusal)
        else:
            messages.success(request, f"Job {job_id} {VERBS[action]}.")
        if action == "delete" and not refusal:
            return redirect(links.jobs(record.stage))
        return redirect(links.job(job_id))
    return page(
        request,
        site,
        scope,
        "confirm.html",
        f"{action.capitalize()} job {job_id}?",
        action=action,
        jobs=[record],
        post_url=links.url("action", job_id, action),
        back_url=links.job(job_id),
        back_label=f"Job {job_id}",
        running=record.stage == Stage.RUNNING,
        cancel_grace=later_settings.cancel_grace,
    )


@viewer_required
def bulk(request: HttpRequest, site: AdminSite, stage: str) -> HttpResponse:
    """Confirm the jobs ticked on a stage listing, then act on each one."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if stage not in STAGE_ACTIONS:
        raise Http404(f"Stage {stage!r} is unknown.")
    action = request.POST.get("action", "")
    _require(request, action)
    scope = resolve(request)
    links = Links(site, scope)
    back_url = request.POST.get("back", "")
    if not back_url.startswith(links.jobs(stage).split("?")[0]):
        back_url = links.jobs(stage)
    job_ids = list(dict.fromkeys(request.POST.getlist("job_id")))[:BULK_LIMIT]
    if not job_ids:
        messages.warning(request, "Tick at least one job first.")
        return redirect(back_url)
    if request.POST.get("confirmed") != "yes":
        records = []
        for job_id in job_ids:
            try:
                records.append(engine.get_job(job_id, namespace=scope.namespace))
            except JobNotFound:
                continue
        return page(
            request,
            site,
            scope,
            "confirm.html",
            f"{action.capitalize()} {len(records)} jobs?",
            action=action,
            jobs=records,
            post_url=links.url("bulk", stage),
            back_url=back_url,
            back_label=f"{stage.capitalize()} jobs",
            bulk=True,
            running=any(r.stage == Stage.RUNNING for r in records),
            cancel_grace=later_settings.cancel_grace,
        )
    done, asked, refusals = 0, 0, []
    for job_id in job_ids:
        refusal = _perform(request, scope, action, job_id)
        if refusal == ASKED:
            asked += 1
        elif refusal:
            refusals.append(refusal)
        else:
            done += 1
    if done:
        messages.success(request, f"{done} job{'s' if done != 1 else ''} {VERBS[action]}.")
    if asked:
        messages.success(request, _asked(asked))
    for refusal in refusals:
        messages.error(request, refusal)
    return redirect(back_url)
