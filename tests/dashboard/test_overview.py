"""The overview: stage counts, throughput, queue waits, graphs, workers and size."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from later_django.dashboard.overview import floor_minute, percentile
from later_django.models import (
    JobTransitionMetric,
    JobWaitMetric,
    QueueSample,
    StageCount,
    Worker,
)

from .conftest import NAMESPACE

pytestmark = pytest.mark.django_db

URL = reverse("admin:later_dashboard_changelist")
LIVE = reverse("admin:later_dashboard_live")


def tile(html: str, stage: str) -> str:
    start = html.index(f'data-stage="{stage}"')
    value = html.index('later-tile-value">', start) + len('later-tile-value">')
    return html[value : html.index("<", value)]


def test_stage_tiles_show_the_trigger_kept_counts(viewer_client, make_job):
    for _ in range(3):
        make_job("failed")
    make_job("running")
    StageCount.objects.filter(namespace=NAMESPACE, stage="success").update(count=1234567)
    StageCount.objects.get_or_create(
        namespace=NAMESPACE, stage="success", defaults={"count": 1234567}
    )
    html = viewer_client.get(URL).content.decode()
    assert tile(html, "failed") == "3"
    assert tile(html, "running") == "1"
    assert tile(html, "success") == "1,234,567"
    assert tile(html, "delayed") == "0"
    assert f'href="{reverse("admin:later_dashboard_jobs", args=["failed"])}"' in html


def test_counts_are_read_without_touching_the_job_index(viewer_client, make_job):
    make_job("failed")
    with CaptureQueriesContext(connection) as queries:
        assert viewer_client.get(LIVE).status_code == 200
    assert not [q for q in queries.captured_queries if "later_jobs_index" in q["sql"]]


def test_throughput_sums_the_last_minute_and_the_last_hour(viewer_client):
    current = floor_minute(timezone.now())
    for minutes_ago, count in ((0, 7), (1, 5), (30, 100), (61, 1000), (90, 9999)):
        JobTransitionMetric.objects.create(
            namespace=NAMESPACE,
            stage="success",
            bucket=current - timedelta(minutes=minutes_ago),
            count=count,
        )
    JobTransitionMetric.objects.create(
        namespace="elsewhere", stage="success", bucket=current, count=50
    )
    context = viewer_client.get(URL).context
    rate = next(r for r in context["rates"] if r.stage == "success")
    assert rate.last_minute == 5
    assert rate.last_hour == 7 + 5 + 100


def test_percentile_is_the_upper_bound_of_the_bin_holding_the_rank():
    bins = [(10, 50), (100, 40), (1000, 9), (10000, 1)]
    assert percentile(bins, 0.5) == 10
    assert percentile(bins, 0.95) == 1000
    assert percentile(bins, 1.0) == 10000
    assert percentile([], 0.5) is None


def test_queue_wait_figures_come_from_the_wait_histogram(viewer_client):
    current = floor_minute(timezone.now())
    for le_ms, count in ((5, 60), (50, 30), (500, 8), (5000, 2)):
        JobWaitMetric.objects.create(
            namespace=NAMESPACE,
            mode="regular",
            bucket=current - timedelta(minutes=1),
            le_ms=le_ms,
            count=count,
        )
    response = viewer_client.get(URL)
    hour = next(w for w, _, _ in response.context["waits"] if w.window == "last hour")
    assert (hour.samples, hour.median_ms, hour.p95_ms) == (100, 5, 500)
    assert "≤ 500 ms" in response.content.decode()


def test_queue_graphs_draw_inline_svg_from_the_samples(viewer_client):
    now = timezone.now()
    for minutes_ago in range(0, 7 * 24 * 60, 90):
        QueueSample.objects.create(
            namespace=NAMESPACE,
            minute=floor_minute(now) - timedelta(minutes=minutes_ago),
            queued=minutes_ago % 700,
            partitioned=3,
        )
    html = viewer_client.get(URL).content.decode()
    assert html.count('<svg class="later-chart-svg"') == 2
    assert 'class="later-series later-series-queued"' in html
    assert "cdn" not in html.lower()
    week = viewer_client.get(URL).context["week_chart"]
    assert week.y_max == 1000
    assert len(week.series[0].points.split()) >= 100


def test_an_empty_graph_says_why(viewer_client):
    html = viewer_client.get(URL).content.decode()
    assert "No samples yet" in html


def test_workers_show_their_heartbeats_and_silent_ones_are_marked(viewer_client):
    now = timezone.now()
    Worker.objects.create(
        namespace=NAMESPACE,
        worker_id="host-a:1:aa",
        hostname="host-a",
        pid=1,
        started_at=now,
        heartbeat_at=now,
    )
    Worker.objects.create(
        namespace=NAMESPACE,
        worker_id="host-b:2:bb",
        hostname="host-b",
        pid=2,
        started_at=now - timedelta(hours=2),
        heartbeat_at=now - timedelta(hours=1),
    )
    html = viewer_client.get(URL).content.decode()
    assert "host-a:1:aa" in html
    assert "host-b:2:bb" in html
    assert html.count('later-badge-ok">live') == 1
    assert html.count('later-badge-bad">silent') == 1


def test_database_size_is_shown(viewer_client):
    context = viewer_client.get(URL).context
    assert context["database_size"] > 0


def test_the_live_fragment_is_the_panels_without_the_page(viewer_client):
    response = viewer_client.get(LIVE)
    html = response.content.decode()
    assert "later-tile" in html
    assert "<html" not in html
    page = viewer_client.get(URL).content.decode()
    assert f'data-refresh-url="{LIVE}"' in page
    assert "later/dashboard.js" in page


def test_the_overview_uses_a_fixed_number_of_queries(
    viewer_client, make_job, django_assert_max_num_queries
):
    for _ in range(20):
        make_job("failed")
    with django_assert_max_num_queries(16):
        viewer_client.get(LIVE)


def test_pages_carry_no_inline_styles_or_scripts(viewer_client, make_job):
    make_job("failed")
    for url in (
        URL,
        reverse("admin:later_dashboard_jobs", args=["failed"]),
        reverse("admin:later_dashboard_topics"),
    ):
        html = viewer_client.get(url).content.decode()
        assert "style=" not in html
        assert "<script>" not in html


def test_wait_bounds_read_as_upper_limits_and_the_open_bin_as_a_floor():
    from later_django.dashboard.present import wait_bound

    assert wait_bound(250) == "≤ 250 ms"
    assert wait_bound(2500) == "≤ 2.5 s"
    assert wait_bound(300000) == "≤ 5 min"
    assert wait_bound(2**62) == "> 24.0 h"
    assert wait_bound(None) == "—"


def test_the_page_navigation_appears_once(viewer_client):
    # Before Django 6.1 the admin renders object-tools inside the content block.
    html = viewer_client.get(URL).content.decode()
    assert html.count('class="later-nav"') == 1
