"""The dashboard's read-only pages; the reads live in overview, listing and topics."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any
from urllib.parse import quote

from django.contrib import messages
from django.contrib.admin import AdminSite
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils import timezone

from .. import jobs as engine
from ..conf import later_settings
from ..exceptions import JobNotFound
from ..records import from_micros
from ..states import CANCELLABLE, FINISHED, RETRYABLE, Stage
from . import charts, listing, permissions, present, redaction, retained, topics
from . import overview as overview_reads
from . import schedules as schedule_reads
from .links import Links
from .scope import Scope, resolve

# The actions the engine accepts for a job in each stage, in the order buttons show them
# (cancelling a running job asks it to stop: cancelling.py).
STAGE_ACTIONS: dict[str, tuple[str, ...]] = {
    stage: tuple(
        action
        for action, accepted in (
            ("retry", RETRYABLE),
            ("cancel", CANCELLABLE),
            ("delete", FINISHED),
        )
        if stage in accepted
    )
    for stage in Stage
}
FILTER_LENGTH = 255
REFRESH_SECONDS = 5
SEQUENCE_MAX = 2**63 - 1

View = Callable[..., HttpResponse]


def viewer_required(view: View) -> View:
    """Refuse (403) staff without the job model's view permission."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not permissions.can_view(request.user):
            raise PermissionDenied(
                "Viewing the Later dashboard needs the 'Can view job' permission."
            )
        return view(request, *args, **kwargs)

    return guarded


def page(
    request: HttpRequest,
    site: AdminSite,
    scope: Scope,
    template: str,
    title: str,
    *,
    status: int = 200,
    **extra: Any,
) -> TemplateResponse:
    links = Links(site, scope)
    context = {
        **site.each_context(request),
        "title": title,
        "scope": scope,
        "namespace_choices": links.namespace_choices() if len(scope.choices) > 1 else [],
        "overview_url": links.url("changelist"),
        "topics_url": links.url("topics"),
        "schedules_url": links.url("schedules"),
        "triage_url": links.url("triage"),
        "app_label": "later",
        **extra,
    }
    return TemplateResponse(request, f"later/dashboard/{template}", context, status=status)


def bad_request(
    request: HttpRequest, site: AdminSite, scope: Scope, message: str, back_url: str
) -> TemplateResponse:
    """Answer 400 with ``message`` on an ordinary dashboard page.

    Messages quote what the request sent, so they go through the template's
    autoescaping like every other value, never straight into the response.
    """
    return page(
        request,
        site,
        scope,
        "bad_request.html",
        "Bad request",
        status=400,
        message=message,
        back_url=back_url,
    )


def overview_context(site: AdminSite, scope: Scope) -> dict[str, Any]:
    now = timezone.now()
    links = Links(site, scope)
    counts = overview_reads.stage_counts(scope)
    week = overview_reads.queue_week(scope, now)
    hour = overview_reads.queue_hour(scope, now)
    return {
        "now": now,
        "stages": [(stage, counts[stage], links.jobs(stage)) for stage in counts],
        "rates": overview_reads.throughput(scope, now),
        "waits": [
            (w, present.wait_bound(w.median_ms), present.wait_bound(w.p95_ms))
            for w in overview_reads.wait_figures(scope, now)
        ],
        "hour_chart": charts.build(
            "Last hour", hour, now - overview_reads.HOUR, now, timedelta(minutes=10), "%H:%M"
        ),
        "week_chart": charts.build(
            "Last 7 days (hourly peak)",
            week,
            now - overview_reads.WEEK,
            now,
            timedelta(days=1),
            "%a %d",
        ),
        "workers": overview_reads.workers(scope, now),
        "database_size": overview_reads.database_size(scope),
        "live_url": links.url("live"),
        "refresh_seconds": REFRESH_SECONDS,
    }


@viewer_required
def overview(request: HttpRequest, site: AdminSite) -> HttpResponse:
    scope = resolve(request)
    return page(
        request, site, scope, "overview.html", "Later dashboard", **overview_context(site, scope)
    )


@viewer_required
def overview_live(request: HttpRequest, site: AdminSite) -> HttpResponse:
    """The overview's live panels alone, fetched by the page every few seconds."""
    scope = resolve(request)
    context = {"scope": scope, **overview_context(site, scope)}
    return TemplateResponse(request, "later/dashboard/_live.html", context)


@viewer_required
def find_job(request: HttpRequest, site: AdminSite) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    job_id = request.GET.get("job_id", "").strip().lower()
    if job_id and listing.index_row(scope, job_id) is not None:
        return redirect(links.job(job_id))
    messages.warning(request, f"No job {job_id!r} in namespace {scope.namespace!r}.")
    return redirect(links.url("changelist"))


@viewer_required
def jobs(request: HttpRequest, site: AdminSite, stage: str) -> HttpResponse:
    if stage not in STAGE_ACTIONS:
        raise Http404(f"Stage {stage!r} is unknown; stages are {', '.join(STAGE_ACTIONS)}.")
    scope = resolve(request)
    links = Links(site, scope)
    task = request.GET.get("task", "").strip()[:FILTER_LENGTH]
    queue = request.GET.get("queue", "").strip()[:FILTER_LENGTH]
    try:
        after = listing.parse_cursor(request.GET["after"]) if request.GET.get("after") else None
        now = timezone.now()
        found = listing.jobs_by_stage(scope, stage, now, task=task, queue=queue, after=after)
    except listing.BadCursor as e:
        return bad_request(request, site, scope, str(e), links.jobs(stage))
    counts = overview_reads.stage_counts(scope)
    allowed = permissions.allowed_actions(request.user)
    return page(
        request,
        site,
        scope,
        "jobs.html",
        f"{stage.capitalize()} jobs",
        stage=stage,
        tabs=[(s, counts[s], links.jobs(s), s == stage) for s in counts],
        rows=links.linked_jobs(found.rows),
        task=task,
        queue=queue,
        first_url=links.jobs(stage, task=task, queue=queue) if after else None,
        clear_url=links.jobs(stage),
        next_url=(
            links.jobs(stage, task=task, queue=queue, after=str(found.next_cursor))
            if found.next_cursor
            else None
        ),
        scanned=found.scanned,
        actions=[a for a in STAGE_ACTIONS[stage] if a in allowed],
        bulk_url=links.url("bulk", stage),
        page_url=links.jobs(stage, task=task, queue=queue, after=request.GET.get("after")),
        filters_namespace=scope.query.get("namespace", ""),
    )


@viewer_required
def job(request: HttpRequest, site: AdminSite, job_id: str) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    try:
        record = engine.get_job(job_id, namespace=scope.namespace)
    except JobNotFound as e:
        raise Http404(str(e)) from e
    row = listing.index_row(scope, job_id)
    previous, following = listing.partition_neighbours(scope, row) if row else (None, None)
    children, more_children = listing.continuations(scope, job_id)
    allowed = permissions.allowed_actions(request.user)
    cancel_requested = (
        from_micros(record.record.cancel_requested_at)
        if record.record.cancel_requested_at is not None
        else None
    )
    asked = record.stage == Stage.RUNNING and cancel_requested is not None
    actions = [
        (action, links.url("action", job_id, action))
        for action in STAGE_ACTIONS.get(record.stage, ())
        if action in allowed
        and not (action == "retry" and record.decode_error)
        and not (action == "cancel" and asked)  # asked already: it is stopping
    ]
    full = set(request.GET.get("full", "").split(",")) & FULL_PARTS
    shown = redaction.redacted(record.task_path, record.args, record.kwargs)
    return page(
        request,
        site,
        scope,
        "job.html",
        f"Job {job_id}",
        job=record,
        row=row,
        arguments_hidden=shown.hidden,
        args_text=_clipped(present.pretty(shown.args), "args" in full),
        kwargs_text=_clipped(present.pretty(shown.kwargs), "args" in full),
        return_text=_clipped(present.pretty(record.return_value), "return" in full),
        reason_text=_clipped(record.cancel_reason or "", "reason" in full),
        errors=[
            (error, _clipped(error.traceback or "", "errors" in full, traceback=True))
            for error in record.errors
        ],
        full_urls={
            part: links.url("job", job_id, full=",".join(sorted(full | {part})))
            for part in FULL_PARTS
        },
        stored_bytes=present.hex_preview(record.record.original_bytes),
        stage_url=links.jobs(record.stage),
        parent_url=links.job(record.parent_id) if record.parent_id else None,
        schedule_url=(
            links.url("schedules") + "#schedule-" + quote(record.record.schedule)
            if record.record.schedule
            else None
        ),
        previous=links.linked_jobs([previous])[0] if previous else None,
        following=links.linked_jobs([following])[0] if following else None,
        continuations=links.linked_jobs(children),
        more_continuations=more_children,
        lease=listing.lease(scope, row) if row else None,
        cancel_requested=cancel_requested,
        stopping=asked,
        cancel_grace=later_settings.cancel_grace,
        partition_url=(
            links.url("partition", record.topic, record.partition)
            if record.topic is not None and record.partition is not None
            else None
        ),
        actions=actions,
    )


FULL_PARTS = frozenset({"args", "return", "errors", "reason"})


def _clipped(text: str, whole: bool, *, traceback: bool = False) -> present.Clipped:
    """``text`` cut for the job page unless ``?full=`` asked for it whole."""
    if whole:
        return present.Clipped(text)
    if traceback:
        return present.clip(
            text, chars=present.TRACEBACK_CHARS, lines=present.TRACEBACK_LINES, keep="tail"
        )
    return present.clip(text, chars=present.VALUE_CHARS)


@viewer_required
def topic_list(request: HttpRequest, site: AdminSite) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    now = timezone.now()
    found, more = topics.topics(scope, now)
    groups, more_groups = topics.consumer_groups(scope, now)
    return page(
        request,
        site,
        scope,
        "topics.html",
        "Topics",
        topics=[(t, links.url("topic", t.name)) for t in found],
        more_topics=more,
        groups=groups,
        more_groups=more_groups,
    )


@viewer_required
def schedule_list(request: HttpRequest, site: AdminSite) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    now = timezone.now()
    rows, more = schedule_reads.schedules(scope, now)
    can_act = permissions.can_change(request.user)

    def actions(identifier: str, paused: bool) -> list[tuple[str, str]]:
        names = ("resume" if paused else "pause", "run") if can_act else ()
        return [(a, links.url("schedule_action", a, identifier)) for a in names]

    return page(
        request,
        site,
        scope,
        "schedules.html",
        "Schedules",
        now=now,
        rows=[
            (
                r,
                _call(r.schedule.task_path, r.schedule.args, r.schedule.kwargs),
                links.job(r.schedule.last_job_id) if r.schedule.last_job_id else None,
                actions(r.schedule.identifier, r.schedule.paused),
            )
            for r in rows
        ],
        more=more,
    )


def _call(task_path: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    shown = redaction.redacted(task_path, args, kwargs)
    return shown.hidden or present.call(shown.args, shown.kwargs)


@viewer_required
def topic_detail(request: HttpRequest, site: AdminSite, topic: str) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    found = topics.topic(scope, topic)
    if found is None:
        raise Http404(f"Topic {topic!r} does not exist in namespace {scope.namespace!r}.")
    try:
        start = max(int(request.GET.get("from", "0")), 0)
    except ValueError:
        return bad_request(
            request,
            site,
            scope,
            f"'from' is {request.GET['from']!r}; it must be a partition number.",
            links.url("topic", topic),
        )
    now = timezone.now()
    rows = topics.partitions(scope, found, start, now)
    step = topics.PARTITION_PAGE
    groups, more_groups = topics.consumer_groups(scope, now, topic=topic)
    numbers = range(start, min(start + step, found.partition_count))
    return page(
        request,
        site,
        scope,
        "topic.html",
        f"Topic {topic}",
        topic=found,
        rows=[
            (
                r,
                links.url("partition", topic, r.partition),
                links.job(r.head_job_id) if r.head_job_id else None,
            )
            for r in rows
        ],
        previous_url=links.url("topic", topic, **{"from": max(start - step, 0)})
        if start > 0
        else None,
        next_url=links.url("topic", topic, **{"from": start + step})
        if start + step < found.partition_count
        else None,
        topic_url=links.url("topic", topic),
        log_rows=retained.log_partitions(scope, topic, numbers),
        log_policy=retained.describe(retained.log_policy(scope, topic)),
        groups=groups,
        more_groups=more_groups,
    )


@viewer_required
def partition_detail(
    request: HttpRequest, site: AdminSite, topic: str, partition: int
) -> HttpResponse:
    scope = resolve(request)
    links = Links(site, scope)
    found = topics.topic(scope, topic)
    if found is None or partition >= found.partition_count:
        raise Http404(f"Topic {topic!r} has no partition {partition} in {scope.namespace!r}.")
    try:
        below = int(request.GET["below"]) if request.GET.get("below") else None
        if below is not None and not 0 <= below <= SEQUENCE_MAX:
            raise ValueError(below)  # the column is a 64-bit integer
    except ValueError:
        return bad_request(
            request,
            site,
            scope,
            f"'below' is {request.GET['below']!r}; it must be a sequence number from 0 to "
            f"{SEQUENCE_MAX}.",
            links.url("partition", topic, partition),
        )
    rows, following = listing.partition_jobs(scope, topic, partition, below=below)
    return page(
        request,
        site,
        scope,
        "partition.html",
        f"{topic} partition {partition}",
        topic=found,
        partition=partition,
        topic_url=links.url("topic", topic),
        rows=links.linked_jobs(rows),
        first_url=links.url("partition", topic, partition) if below is not None else None,
        next_url=links.url("partition", topic, partition, below=following) if following else None,
    )
