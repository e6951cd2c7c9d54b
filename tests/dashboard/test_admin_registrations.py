"""The later_* tables are browsable, read-only, and never counted in full."""

import json
import os
import subprocess
import sys

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from later_django.admin import CappedPaginator
from later_django.counts import fold
from later_django.models import JobIndexRow, StageCount, StorageValue

from .conftest import NAMESPACE

pytestmark = pytest.mark.django_db

REGISTERED = [
    "jobindexrow",
    "stagecount",
    "deliverycommand",
    "jobexecution",
    "topic",
    "partitionsequence",
    "partitionhead",
    "partitionlease",
    "partitionjob",
    "worker",
    "logpartition",
    "logrecord",
    "logconsumeroffset",
    "logconsumermember",
    "logconsumerlease",
]


@pytest.fixture
def superuser_client():
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.mark.parametrize("model_name", REGISTERED)
def test_every_browsable_table_has_a_read_only_changelist(superuser_client, model_name):
    response = superuser_client.get(reverse(f"admin:later_{model_name}_changelist"))
    assert response.status_code == 200
    model_admin = response.context["cl"].model_admin
    request = response.wsgi_request
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_internal_tables_are_not_registered():
    assert StorageValue not in admin.site._registry


def test_job_changelist_links_to_the_dashboard_detail(superuser_client, make_job):
    row = make_job("failed")
    html = superuser_client.get(reverse("admin:later_jobindexrow_changelist")).content.decode()
    assert f'href="/admin/later/dashboard/job/{row.job_id}/"' in html


def test_counts_stop_at_the_cap(superuser_client, make_job, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 3)
    for _ in range(5):
        make_job("failed")
    response = superuser_client.get(reverse("admin:later_jobindexrow_changelist"))
    assert response.context["cl"].result_count == 4
    assert "More than 3 jobs" in response.content.decode()


def test_the_stage_counter_table_shows_the_trigger_counts(superuser_client, make_job):
    make_job("failed")
    fold()
    assert StageCount.objects.get(namespace=NAMESPACE, stage="failed").count == 1
    html = superuser_client.get(reverse("admin:later_stagecount_changelist")).content.decode()
    assert '<td class="field-stage">Failed</td>' in html


@override_settings(
    TASKS={
        "default": {
            "BACKEND": "later_django.backend.LaterBackend",
            "OPTIONS": {"namespace": "tests"},
        },
        "other": {
            "BACKEND": "later_django.backend.LaterBackend",
            "OPTIONS": {"namespace": "billing"},
        },
    }
)
def test_several_namespaces_get_a_switch_and_stay_selected(viewer_client, make_job):
    make_job("failed", namespace="billing")
    url = reverse("admin:later_dashboard_changelist")
    html = viewer_client.get(url).content.decode()
    assert f'href="{url}?namespace=billing"' in html
    billing = viewer_client.get(url, {"namespace": "billing"})
    assert dict((s, c) for s, c, _ in billing.context["stages"])["failed"] == 1
    failed_url = reverse("admin:later_dashboard_jobs", args=["failed"]) + "?namespace=billing"
    assert f'href="{failed_url}"' in billing.content.decode()
    assert viewer_client.get(url, {"namespace": "nope"}).status_code == 404
    assert JobIndexRow.objects.filter(namespace="billing").count() == 1


def test_changelists_show_one_namespace_at_a_time(superuser_client, make_job):
    ours = make_job("failed")
    theirs = make_job("failed", namespace="elsewhere")
    html = superuser_client.get(reverse("admin:later_jobindexrow_changelist")).content.decode()
    assert ours.job_id in html
    assert theirs.job_id not in html


def test_a_stage_filtered_job_changelist_is_newest_transition_first(superuser_client, make_job):
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    older = make_job("failed", at=now - timedelta(hours=1))
    newer = make_job("failed", at=now)
    make_job("success", at=now)
    response = superuser_client.get(
        reverse("admin:later_jobindexrow_changelist"), {"stage__exact": "failed"}
    )
    assert [r.job_id for r in response.context["cl"].result_list] == [newer.job_id, older.job_id]


INTERNAL = [name for name in REGISTERED if name != "jobindexrow"]


def index_links(client) -> str:
    return client.get(reverse("admin:index")).content.decode()


@pytest.mark.parametrize("shown", [False, True])
def test_the_admin_index_lists_internal_tables_only_with_the_setting(superuser_client, shown):
    with override_settings(LATER_ADMIN_INTERNAL_TABLES=shown):
        html = index_links(superuser_client)
    for name in ["dashboard", "jobindexrow"]:
        assert f'href="{reverse(f"admin:later_{name}_changelist")}"' in html
    listed = [n for n in INTERNAL if f'href="{reverse(f"admin:later_{n}_changelist")}"' in html]
    assert listed == (INTERNAL if shown else [])


def test_hidden_internal_tables_keep_their_changelist_urls(superuser_client):
    response = superuser_client.get(reverse("admin:later_stagecount_changelist"))
    assert response.status_code == 200


PAGES_LOADED_BY_CHECKS = """
import functools, json, sys, django
django.setup()
from django.contrib import admin
from django.core import checks
from django.urls import reverse
checks.run_checks()
reverse("admin:later_dashboard_changelist")
from later_django.dashboard.entry import Dashboard
pages = set()
for pattern in admin.site._registry[Dashboard].get_urls():
    view = pattern.callback
    while isinstance(view, functools.partial) or hasattr(view, "__wrapped__"):
        view = view.func if isinstance(view, functools.partial) else view.__wrapped__
    pages.add(view.__module__)
loaded = [name for name in sys.modules if name.startswith("later_django.dashboard.")]
print(json.dumps({"pages": sorted(pages), "loaded": sorted(loaded)}))
"""
# Modules that only the pages import, beside the pages' own.
PAGE_ONLY_MODULES = ["later_django.dashboard.charts"]


def test_the_system_checks_load_the_admin_urls_without_the_dashboards_pages():
    # Every management command (the worker's too) runs the checks, which build the
    # admin's URLs; the modules of the pages those URLs serve wait for the first
    # request that needs them. The pages' modules are read off the URLs themselves,
    # so a page added later is covered too.
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="tests.settings")
    out = subprocess.run(
        [sys.executable, "-c", PAGES_LOADED_BY_CHECKS],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(out.stdout)
    assert "later_django.dashboard.views" in found["pages"], found
    unwanted = set(found["pages"]) | set(PAGE_ONLY_MODULES)
    assert sorted(unwanted & set(found["loaded"])) == [], found
