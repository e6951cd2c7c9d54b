"""Admin registrations: the dashboard, and read-only changelists of the later_* tables.

Every changelist reads bounded pages: counts stop at ``CappedPaginator.cap``
(so a million-row table is never counted in full) and the namespace filter
offers the configured namespaces instead of scanning for distinct values.
Changes go through the dashboard's actions, which call the engine; these
tables are never edited by hand.

The admin index lists the dashboard and jobs only. The engine's internal
tables join them when ``LATER_ADMIN_INTERNAL_TABLES`` is True; their
changelists are registered either way, so the setting is read per request
(``override_settings`` works) and bookmarked URLs keep working.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from .conf import later_settings
from .dashboard.entry import Dashboard, DashboardAdmin
from .models import (
    DeliveryCommand,
    JobExecution,
    JobIndexRow,
    LogConsumerLease,
    LogConsumerMember,
    LogConsumerOffset,
    LogPartition,
    LogRecord,
    PartitionHead,
    PartitionJob,
    PartitionLease,
    PartitionSequence,
    StageCount,
    Topic,
    Worker,
)
from .options import configured_namespaces
from .states import Stage

admin.site.register(Dashboard, DashboardAdmin)


class CappedPaginator(Paginator):
    """Counts at most ``cap + 1`` rows, so a changelist never counts a huge table."""

    cap = 10_000

    @cached_property
    def count(self) -> int:
        object_list: Any = self.object_list
        return int(object_list[: self.cap + 1].count())

    @property
    def capped(self) -> bool:
        return self.count > self.cap


def default_namespace() -> str:
    return (configured_namespaces() or ["default"])[0]


class NamespaceFilter(admin.SimpleListFilter):
    """One namespace at a time, the first configured by default, as on the dashboard.

    Offering the configured namespaces avoids the ``SELECT DISTINCT`` a field
    filter would run, and an equality on ``namespace`` lets every query use
    the tables' indexes, which all start with it.
    """

    title = "namespace"
    parameter_name = "namespace"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(ns, ns) for ns in configured_namespaces() or [default_namespace()]]

    def has_output(self) -> bool:
        # Always shown: the admin applies only the filters it shows, and this one
        # always narrows the list to the namespace it names.
        return True

    def value(self) -> str:
        return str(super().value() or default_namespace())

    def choices(self, changelist: Any) -> Iterator[Any]:
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(namespace=self.value())


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse a later_* table; the engine alone writes to it."""

    paginator = CappedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    sortable_by = ()  # a click on a column header would sort a whole table
    list_per_page = 50
    list_filter = (NamespaceFilter,)
    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class InternalTableAdmin(ReadOnlyAdmin):
    """An engine table: on the admin index only with LATER_ADMIN_INTERNAL_TABLES."""

    def get_model_perms(self, request: HttpRequest) -> dict[str, bool]:
        # The index and the sidebar list a model only when one of these is True.
        if not later_settings.admin_internal_tables:
            return {}
        return super().get_model_perms(request)


@admin.register(JobIndexRow)
class JobIndexRowAdmin(ReadOnlyAdmin):
    list_display = (
        "dashboard_link",
        "task_path",
        "queue_name",
        "stage",
        "attempts",
        "transitioned_at",
        "namespace",
    )
    list_filter = (NamespaceFilter, "stage")  # type: ignore[assignment]
    list_display_links = None  # the job column links to the dashboard's detail page instead
    ordering = ("-id",)

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # With a stage chosen, this order walks later_jobsindex_stage_idx, which holds
        # no queued job without a topic: that stage keeps the primary key's order.
        stage = request.GET.get("stage__exact")
        if stage and stage != Stage.ENQUEUED:
            return ("-transitioned_at", "-id")
        return ("-id",)

    @admin.display(description="job", ordering="job_id")
    def dashboard_link(self, obj: JobIndexRow) -> str:
        url = reverse("admin:later_dashboard_job", args=[obj.job_id])
        if obj.namespace != default_namespace():
            url = f"{url}?{urlencode({'namespace': obj.namespace})}"
        return format_html('<a href="{}"><code>{}</code></a>', url, obj.job_id)


@admin.register(StageCount)
class StageCountAdmin(InternalTableAdmin):
    list_display = ("namespace", "stage", "count")
    ordering = ("namespace", "stage")


@admin.register(DeliveryCommand)
class DeliveryCommandAdmin(InternalTableAdmin):
    list_display = (
        "job_id",
        "queue_name",
        "priority",
        "available_at",
        "lease_owner",
        "enqueued_at",
        "namespace",
    )
    ordering = ("-id",)


@admin.register(JobExecution)
class JobExecutionAdmin(InternalTableAdmin):
    list_display = ("job_id", "owner", "epoch", "started_at", "lease_expires_at", "namespace")
    ordering = ("-id",)


@admin.register(Topic)
class TopicAdmin(InternalTableAdmin):
    list_display = ("name", "partition_count", "created_at", "namespace")
    ordering = ("namespace", "name")


@admin.register(PartitionSequence)
class PartitionSequenceAdmin(InternalTableAdmin):
    list_display = ("topic", "partition", "next_sequence", "namespace")
    ordering = ("namespace", "topic", "partition")


@admin.register(PartitionHead)
class PartitionHeadAdmin(InternalTableAdmin):
    list_display = ("topic", "partition", "sequence", "job_id", "available_at", "namespace")
    ordering = ("namespace", "topic", "partition")


@admin.register(PartitionLease)
class PartitionLeaseAdmin(InternalTableAdmin):
    list_display = ("topic", "partition", "owner", "epoch", "expires_at", "namespace")
    ordering = ("namespace", "topic", "partition")


@admin.register(PartitionJob)
class PartitionJobAdmin(InternalTableAdmin):
    list_display = ("topic", "partition", "sequence", "job_id", "available_at", "namespace")
    ordering = ("-id",)


@admin.register(Worker)
class WorkerAdmin(InternalTableAdmin):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "concurrency",
        "started_at",
        "heartbeat_at",
        "namespace",
    )
    ordering = ("-heartbeat_at",)


@admin.register(LogPartition)
class LogPartitionAdmin(InternalTableAdmin):
    list_display = ("topic", "partition", "next_offset", "namespace")
    ordering = ("namespace", "topic", "partition")


@admin.register(LogRecord)
class LogRecordAdmin(InternalTableAdmin):
    list_display = ("topic", "partition", "offset", "key_preview", "payload_size", "appended_at")
    ordering = ("-id",)

    @admin.display(description="key")
    def key_preview(self, obj: LogRecord) -> str:
        if obj.key is None:
            return "—"
        return bytes(obj.key)[:32].decode("utf-8", errors="backslashreplace")

    @admin.display(description="payload bytes")
    def payload_size(self, obj: LogRecord) -> int:
        return len(obj.payload)


@admin.register(LogConsumerOffset)
class LogConsumerOffsetAdmin(InternalTableAdmin):
    list_display = ("group", "topic", "partition", "next_offset", "updated_at", "namespace")
    ordering = ("namespace", "group", "topic", "partition")


@admin.register(LogConsumerMember)
class LogConsumerMemberAdmin(InternalTableAdmin):
    list_display = ("group", "member_id", "joined_at", "heartbeat_at", "namespace")
    ordering = ("namespace", "group", "member_id")


@admin.register(LogConsumerLease)
class LogConsumerLeaseAdmin(InternalTableAdmin):
    list_display = ("group", "topic", "partition", "owner", "epoch", "expires_at", "namespace")
    ordering = ("namespace", "group", "topic", "partition")
