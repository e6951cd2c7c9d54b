"""URLs of the dashboard pages, keeping the selected namespace in every link."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin import AdminSite
from django.urls import reverse

from .scope import Scope


@dataclass(frozen=True)
class Linked:
    """A row with the URL of its page."""

    row: Any
    url: str


class Links:
    def __init__(self, site: AdminSite, scope: Scope) -> None:
        self.site = site
        self.scope = scope

    def url(self, name: str, *args: Any, **query: Any) -> str:
        base = reverse(f"admin:later_dashboard_{name}", args=args, current_app=self.site.name)
        params = {**self.scope.query}
        params.update({k: v for k, v in query.items() if v not in (None, "")})
        return f"{base}?{urlencode(params)}" if params else base

    def job(self, job_id: str) -> str:
        return self.url("job", job_id)

    def jobs(self, stage: str, **query: Any) -> str:
        return self.url("jobs", stage, **query)

    def linked_jobs(self, rows: list[Any]) -> list[Linked]:
        return [Linked(row, self.job(row.job_id)) for row in rows]

    def namespace_choices(self) -> list[tuple[str, str, bool]]:
        """(namespace, URL of its overview, selected) for the namespace switch."""
        path = reverse("admin:later_dashboard_changelist", current_app=self.site.name)
        choices = []
        for index, namespace in enumerate(self.scope.choices):
            url = path if index == 0 else f"{path}?{urlencode({'namespace': namespace})}"
            choices.append((namespace, url, namespace == self.scope.namespace))
        return choices
