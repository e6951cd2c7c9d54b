"""Topics: per-partition head, lag, lease, and why a partition is blocked."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from later_django.dashboard import topics as topic_reads
from later_django.log.compaction import checkpoint_key
from later_django.models import (
    LogConsumerLease,
    LogConsumerOffset,
    LogPartition,
    PartitionHead,
    PartitionJob,
    PartitionLease,
    Topic,
)
from later_django.options import LogPolicy
from later_django.storage import Storage
from later_django.tasks_api import task_backends

from .conftest import NAMESPACE

pytestmark = pytest.mark.django_db

TOPIC = reverse("admin:later_dashboard_topic", args=["parcels"])


def queue_in_partition(make_job, partition, stages, *, available_at=None, **head_fields):
    """Queue jobs in a partition; the first becomes its head."""
    now = timezone.now()
    rows = []
    for sequence, stage in enumerate(stages, start=1):
        fields = head_fields if sequence == 1 else {}
        rows.append(
            make_job(stage, topic="parcels", partition=partition, sequence=sequence, **fields)
        )
        PartitionJob.objects.create(
            namespace=NAMESPACE,
            topic="parcels",
            partition=partition,
            sequence=sequence,
            job_id=rows[-1].job_id,
            available_at=available_at or now,
        )
    PartitionHead.objects.create(
        namespace=NAMESPACE,
        topic="parcels",
        partition=partition,
        sequence=1,
        job_id=rows[0].job_id,
        available_at=available_at or now,
    )
    return rows


@pytest.fixture
def parcels():
    return Topic.objects.create(
        namespace=NAMESPACE, name="parcels", partition_count=6, created_at=timezone.now()
    )


def partitions(client):
    return {row.partition: row for row, _, _ in client.get(TOPIC).context["rows"]}


def test_topic_list_counts_active_ready_and_leased_partitions(viewer_client, make_job, parcels):
    soon = timezone.now() + timedelta(hours=1)
    queue_in_partition(make_job, 0, ["enqueued"])
    queue_in_partition(make_job, 1, ["delayed"], available_at=soon, run_at=soon)
    PartitionLease.objects.create(
        namespace=NAMESPACE,
        topic="parcels",
        partition=0,
        owner="w",
        epoch=1,
        expires_at=timezone.now() + timedelta(seconds=30),
    )
    response = viewer_client.get(reverse("admin:later_dashboard_topics"))
    summary, url = next(t for t in response.context["topics"] if t[0].name == "parcels")
    assert (summary.name, summary.partition_count) == ("parcels", 6)
    assert (summary.active, summary.ready, summary.leased) == (2, 1, 1)
    assert url == TOPIC


def test_partitions_show_head_lag_lease_and_state(viewer_client, make_job, parcels):
    rows = queue_in_partition(make_job, 2, ["running", "enqueued", "enqueued"])
    PartitionLease.objects.create(
        namespace=NAMESPACE,
        topic="parcels",
        partition=2,
        owner="host:1:aa",
        epoch=7,
        expires_at=timezone.now() + timedelta(seconds=30),
    )
    found = partitions(viewer_client)
    assert len(found) == 6
    p = found[2]
    assert (p.head_sequence, p.head_job_id, p.lag) == (1, rows[0].job_id, 3)
    assert (p.owner, p.epoch, p.state, p.blocked) == ("host:1:aa", 7, "running", False)
    assert found[0].state == "idle"


def test_a_delayed_head_blocks_its_partition(viewer_client, make_job, parcels):
    later = timezone.now() + timedelta(hours=1)
    queue_in_partition(make_job, 0, ["delayed", "enqueued"], available_at=later, run_at=later)
    p = partitions(viewer_client)[0]
    assert p.blocked
    assert p.reason.startswith("delayed head: due ")


def test_a_head_s_due_time_reads_in_utc_or_in_local_time_with_use_tz_off(
    viewer_client, make_job, parcels
):
    due = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    queue_in_partition(make_job, 0, ["delayed"], available_at=due, run_at=due)
    assert partitions(viewer_client)[0].reason == "delayed head: due 2031-05-06 07:08:09 UTC"
    with override_settings(USE_TZ=False, TIME_ZONE="Asia/Kathmandu"):
        local = datetime(2031, 5, 6, 12, 53, 9)
        queue_in_partition(make_job, 1, ["delayed"], available_at=local, run_at=local)
        assert partitions(viewer_client)[1].reason == (
            "delayed head: due 2031-05-06 12:53:09 Asia/Kathmandu"
        )


def test_a_retrying_head_blocks_its_partition(viewer_client, make_job, parcels):
    later = timezone.now() + timedelta(minutes=2)
    queue_in_partition(
        make_job, 1, ["requeued", "enqueued"], available_at=later, run_at=later, attempts=2
    )
    p = partitions(viewer_client)[1]
    assert p.blocked
    assert p.reason.startswith("retrying head: attempt 2 failed, next try ")


def test_a_waiting_head_blocks_its_partition(viewer_client, make_job, parcels):
    queue_in_partition(make_job, 3, ["waiting"], parent_job_id="01jparent0000000000000000x")
    p = partitions(viewer_client)[3]
    assert p.blocked
    assert p.reason == "waiting head: for parent job 01jparent0000000000000000x"


def test_a_lapsed_lease_is_explained(viewer_client, make_job, parcels):
    queue_in_partition(make_job, 4, ["enqueued"])
    PartitionLease.objects.create(
        namespace=NAMESPACE,
        topic="parcels",
        partition=4,
        owner="gone:1:aa",
        epoch=3,
        expires_at=timezone.now() - timedelta(seconds=5),
    )
    p = partitions(viewer_client)[4]
    assert p.state == "ready"
    assert "lease of gone:1:aa lapsed" in p.reason


def test_lag_counts_stop_at_the_cap(viewer_client, make_job, parcels, monkeypatch):
    monkeypatch.setattr(topic_reads, "LAG_CAP", 2)
    queue_in_partition(make_job, 5, ["enqueued"] * 4)
    p = partitions(viewer_client)[5]
    assert (p.lag, p.lag_capped) == (2, True)
    assert "2+" in viewer_client.get(TOPIC).content.decode()


def test_partitions_are_paged(viewer_client, monkeypatch):
    monkeypatch.setattr(topic_reads, "PARTITION_PAGE", 4)
    Topic.objects.create(
        namespace=NAMESPACE, name="parcels", partition_count=10, created_at=timezone.now()
    )
    first = viewer_client.get(TOPIC)
    assert [r.partition for r, _, _ in first.context["rows"]] == [0, 1, 2, 3]
    second = viewer_client.get(first.context["next_url"])
    assert [r.partition for r, _, _ in second.context["rows"]] == [4, 5, 6, 7]


def test_an_unknown_topic_is_not_found(viewer_client):
    assert viewer_client.get(TOPIC).status_code == 404


def test_partition_page_lists_jobs_newest_sequence_first(viewer_client, make_job, parcels):
    rows = queue_in_partition(make_job, 0, ["success", "running", "enqueued"])
    response = viewer_client.get(reverse("admin:later_dashboard_partition", args=["parcels", 0]))
    assert [i.row.job_id for i in response.context["rows"]] == [r.job_id for r in reversed(rows)]
    missing = reverse("admin:later_dashboard_partition", args=["parcels", 6])
    assert viewer_client.get(missing).status_code == 404


def test_consumer_groups_show_committed_offsets_and_lag(viewer_client):
    now = timezone.now()
    LogPartition.objects.create(namespace=NAMESPACE, topic="events", partition=0, next_offset=120)
    LogConsumerOffset.objects.create(
        namespace=NAMESPACE,
        group="billing",
        topic="events",
        partition=0,
        next_offset=100,
        updated_at=now,
    )
    LogConsumerLease.objects.create(
        namespace=NAMESPACE,
        group="billing",
        topic="events",
        partition=0,
        owner="m-1",
        epoch=2,
        expires_at=now + timedelta(seconds=30),
    )
    groups = viewer_client.get(reverse("admin:later_dashboard_topics")).context["groups"]
    assert [(g.group, g.committed, g.end, g.lag, g.owner, g.live) for g in groups] == [
        ("billing", 100, 120, 20, "m-1", True)
    ]


def test_a_topic_page_shows_each_log_partition_s_slowest_group_lag_and_compaction(
    viewer_client, parcels, monkeypatch
):
    backend = task_backends["default"]
    policy = LogPolicy(compact=True, retention_seconds=7 * 86400)
    monkeypatch.setattr(backend, "later", replace(backend.later, log_upkeep={"parcels": policy}))
    now = timezone.now()
    LogPartition.objects.create(namespace=NAMESPACE, topic="parcels", partition=1, next_offset=500)
    LogPartition.objects.create(namespace=NAMESPACE, topic="parcels", partition=3, next_offset=40)
    for group, offset in (("billing", 480), ("audit", 350)):
        LogConsumerOffset.objects.create(
            namespace=NAMESPACE,
            group=group,
            topic="parcels",
            partition=1,
            next_offset=offset,
            updated_at=now,
        )
    Storage(NAMESPACE).set(checkpoint_key("parcels", 1), b"350")
    response = viewer_client.get(TOPIC)
    rows = response.context["log_rows"]
    assert [(r.partition, r.end, r.groups, r.boundary, r.lag, r.compacted_to) for r in rows] == [
        (1, 500, 2, 350, 150, 350),
        (3, 40, 0, None, None, 0),
    ]
    html = response.content.decode()
    assert 'id="later-log"' in html
    assert (
        "Workers keep only the newest record of each key and delete records older than 7 days, "
        "below the offset of the slowest group only."
    ) in html
    groups = response.context["groups"]
    assert [(g.group, g.partition, g.committed, g.lag) for g in groups] == [
        ("audit", 1, 350, 150),
        ("billing", 1, 480, 20),
    ]
    assert 'id="later-topic-groups"' in html


def test_a_topic_without_a_log_policy_says_its_records_are_kept(viewer_client, parcels):
    html = viewer_client.get(TOPIC).content.decode()
    assert "No upkeep policy: workers keep every record" in html
    assert "No record appended to these partitions, and no group committed in them." in html
    assert 'id="later-topic-groups"' not in html
