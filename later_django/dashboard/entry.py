"""The dashboard's place in the admin: /admin/later/dashboard/ and its index entry.

The admin builds its index and URLs from registered models, so the dashboard
registers a placeholder model. It lives in a private app registry: it has no
table, no migration, no content type and no permissions of its own; access is
decided by the permissions on the job model (see ``permissions``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib import import_module
from typing import Any

from django.apps.registry import Apps
from django.contrib import admin
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from . import permissions

PRIVATE_APPS = Apps()


class Dashboard(models.Model):
    """Placeholder that gives the dashboard an entry in the admin index."""

    class Meta:
        apps = PRIVATE_APPS
        app_label = "later"
        managed = False
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"

    def __str__(self) -> str:
        return "Later dashboard"


def _deferred(module: str, name: str) -> Callable[..., HttpResponse]:
    """The view ``name`` of the dashboard's module ``module``, imported by its first request.

    The admin builds its URLs in every process that loads the URLconf, and the
    system checks load it before any management command runs. Importing the
    views there would load the whole dashboard (and what its pages read) into
    every worker and every ``manage.py`` call, about 0.1 s of each start.
    """

    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        found = getattr(import_module(f"{__package__}.{module}"), name)
        return found(request, *args, **kwargs)

    view.__name__ = view.__qualname__ = name
    view.__module__ = f"{__package__}.{module}"
    return view


class DashboardAdmin(admin.ModelAdmin):
    """Serves the dashboard pages in place of a changelist."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return permissions.can_view(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return permissions.can_view(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        def wrap(view: str) -> Callable[..., HttpResponse]:
            module, name = view.split(".")
            return self.admin_site.admin_view(
                partial(_deferred(module, name), site=self.admin_site)
            )

        name = "later_dashboard_"
        return [
            path("", wrap("views.overview"), name=f"{name}changelist"),
            path("live/", wrap("views.overview_live"), name=f"{name}live"),
            path("find/", wrap("views.find_job"), name=f"{name}find"),
            path("jobs/<str:stage>/", wrap("views.jobs"), name=f"{name}jobs"),
            path("jobs/<str:stage>/bulk/", wrap("actions.bulk"), name=f"{name}bulk"),
            path("job/<str:job_id>/", wrap("views.job"), name=f"{name}job"),
            path(
                "job/<str:job_id>/<str:action>/",
                wrap("actions.single"),
                name=f"{name}action",
            ),
            path("schedules/", wrap("views.schedule_list"), name=f"{name}schedules"),
            path(
                # the identifier last and as a path: a stored one may hold any character
                "schedules/<str:action>/<path:identifier>/",
                wrap("schedule_actions.action"),
                name=f"{name}schedule_action",
            ),
            path("triage/", wrap("desk.desk"), name=f"{name}triage"),
            path(
                "triage/<str:topic>/<int:partition>/<str:action>/",
                wrap("desk.action"),
                name=f"{name}triage_action",
            ),
            path("topics/", wrap("views.topic_list"), name=f"{name}topics"),
            path("topics/<str:topic>/", wrap("views.topic_detail"), name=f"{name}topic"),
            path(
                "topics/<str:topic>/<int:partition>/",
                wrap("views.partition_detail"),
                name=f"{name}partition",
            ),
        ]
