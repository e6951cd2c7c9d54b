"""The triage desk: blocked partitions with reasons and counts, and skip, retry now, release."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from later_django.dashboard import triage as triage_reads
from later_django.engine.outcomes import RETRY
from later_django.jobs import get_job
from later_django.models import (
    JobExecution,
    JobIndexRow,
    PartitionHead,
    PartitionJob,
    PartitionLease,
)
from later_django.topics.registry import forget_layouts
from tests.topics import tasks
from tests.topics.helpers import claim, finish, keys_in_distinct_partitions

pytestmark = pytest.mark.django_db

DESK = reverse("admin:later_dashboard_triage")


@pytest.fixture(autouse=True)
def fresh_layout_checks():
    forget_layouts()  # each test's database starts with its own later_topic rows
    yield
    forget_layouts()


def enqueue(key: str, count: int) -> list[str]:
    return [tasks.step.using(partition_key=key).enqueue(key, n).id for n in range(count)]


def partition_of(job_id: str) -> int:
    return JobIndexRow.objects.get(job_id=job_id).partition


def stage(job_id: str) -> str:
    return JobIndexRow.objects.get(job_id=job_id).stage


def retrying(key: str, count: int = 3) -> list[str]:
    """A partition whose head failed once and waits a minute for its retry."""
    ids = enqueue(key, count)
    [item] = [c for c in claim("worker-a") if c.job_id == ids[0]]
    finish("worker-a", item, RETRY, retry_in=60)
    return ids


def lapsed(key: str, count: int = 2):
    """A partition whose running head's lease expired: its worker stopped."""
    ids = enqueue(key, count)
    [item] = [c for c in claim("worker-a") if c.job_id == ids[0]]
    past = timezone.now() - timedelta(seconds=5)
    where = {"topic": "orders", "partition": partition_of(ids[0])}
    PartitionLease.objects.filter(**where).update(expires_at=past)
    PartitionHead.objects.filter(**where).update(available_at=past)
    return ids, item


def untaken(key: str, count: int = 1, ago: float = 30) -> list[str]:
    """A partition whose head could run for ``ago`` seconds but no worker took it."""
    ids = enqueue(key, count)
    earlier = timezone.now() - timedelta(seconds=ago)
    PartitionHead.objects.filter(topic="orders", partition=partition_of(ids[0])).update(
        available_at=earlier
    )
    return ids


def desk_rows(client):
    return {row.job_id: row for row, *_ in client.get(DESK).context["rows"]}


def action_url(job_id: str, action: str) -> str:
    base = reverse(
        "admin:later_dashboard_triage_action", args=["orders", partition_of(job_id), action]
    )
    return f"{base}?job={job_id}"


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


# The page


def test_the_desk_lists_each_kind_of_blocked_partition_with_why_and_how_many_wait(viewer_client):
    a, b, c, d = keys_in_distinct_partitions(4)
    failing = retrying(a, 3)
    stuck, _ = lapsed(b, 2)
    idle = untaken(c, 4)
    enqueue(d, 2)  # a fresh head, runnable and about to be taken: not blocked
    response = viewer_client.get(DESK)
    assert response.status_code == 200
    rows = {row.job_id: row for row, *_ in response.context["rows"]}
    assert set(rows) == {failing[0], stuck[0], idle[0]}

    assert rows[failing[0]].kind == "retrying"
    assert "attempt 1 failed; the head waits for its retry at" in rows[failing[0]].reason
    assert rows[failing[0]].behind == 2
    assert rows[stuck[0]].kind == "lapsed"
    assert "the lease of worker-a (epoch 1) expired at" in rows[stuck[0]].reason
    assert rows[stuck[0]].behind == 1
    assert rows[idle[0]].kind == "untaken"
    assert "no worker has taken it for longer than a lease" in rows[idle[0]].reason
    assert "serving queue 'default'" in rows[idle[0]].reason
    assert rows[idle[0]].behind == 3

    html = response.content.decode()
    assert f'href="{reverse("admin:later_dashboard_job", args=[failing[0]])}"' in html
    assert "the head waits for its retry" in html


def test_the_longest_blocked_partition_comes_first(viewer_client):
    a, b = keys_in_distinct_partitions(2)
    recent = untaken(a, ago=30)
    older = untaken(b, ago=600)
    order = [row.job_id for row, *_ in viewer_client.get(DESK).context["rows"]]
    assert order == [older[0], recent[0]]


def test_a_runnable_head_is_listed_only_after_a_lease_length_untaken(viewer_client):
    a, b = keys_in_distinct_partitions(2)
    untaken(a, ago=0.5)  # tests' lease_seconds is 2
    stale = untaken(b, ago=5)
    assert set(desk_rows(viewer_client)) == {stale[0]}


def test_a_running_head_under_a_live_lease_and_a_delayed_head_are_not_listed(viewer_client):
    a, b = keys_in_distinct_partitions(2)
    enqueue(a, 2)
    claim("worker-a")
    tasks.step.using(partition_key=b, run_after=timezone.now() + timedelta(hours=1)).enqueue(b, 0)
    assert desk_rows(viewer_client) == {}
    assert "No partition is blocked" in viewer_client.get(DESK).content.decode()


def test_counts_behind_a_head_stop_at_the_cap(viewer_client, monkeypatch):
    monkeypatch.setattr(triage_reads, "BEHIND_CAP", 2)
    ids = untaken("a", count=5)
    response = viewer_client.get(DESK)
    [row] = [row for row, *_ in response.context["rows"]]
    assert (row.job_id, row.behind, row.behind_capped) == (ids[0], 2, True)
    assert '<td class="later-num later-behind">2+</td>' in response.content.decode()


def test_the_desk_reads_a_bounded_number_of_partitions(viewer_client, monkeypatch):
    monkeypatch.setattr(triage_reads, "DESK_LIMIT", 2)
    for key in keys_in_distinct_partitions(3):
        untaken(key)
    response = viewer_client.get(DESK)
    assert len(response.context["rows"]) == 2
    assert "only the 2 blocked longest are shown" in response.content.decode()


def test_every_page_and_the_topics_page_link_to_the_desk(viewer_client):
    overview = viewer_client.get(reverse("admin:later_dashboard_changelist")).content.decode()
    assert f'href="{DESK}">Triage desk</a>' in overview
    topics = viewer_client.get(reverse("admin:later_dashboard_topics")).content.decode()
    assert f'href="{DESK}" id="later-triage-link"' in topics


def test_a_viewer_sees_the_desk_without_actions(viewer_client, operator_client):
    untaken("a")
    assert "later-action-skip" not in viewer_client.get(DESK).content.decode()
    assert "later-action-skip" in operator_client.get(DESK).content.decode()


# Actions


def test_the_confirmation_page_names_the_head_and_changes_nothing(operator_client):
    ids = retrying("a")
    response = operator_client.get(action_url(ids[0], "skip"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Are you sure you want to skip this head?" in html
    assert ids[0] in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert stage(ids[0]) == "requeued"
    assert PartitionHead.objects.get().job_id == ids[0]


def test_skip_cancels_a_retrying_head_with_its_reason_and_moves_the_partition_on(operator_client):
    ids = retrying("a", 3)
    response = operator_client.post(action_url(ids[0], "skip"), {"reason": "bad card"})
    assert response.status_code == 302
    assert response.url == DESK
    assert messages_of(response) == [
        f"Job {ids[0]} skipped and cancelled; the partition moved on to its next job."
    ]
    assert stage(ids[0]) == "cancelled"
    head = PartitionHead.objects.get()
    assert (head.job_id, head.sequence) == (ids[1], 2)
    assert list(PartitionJob.objects.values_list("sequence", flat=True)) == [2, 3]
    job = get_job(ids[0], namespace="tests")
    assert job.cancel_reason == "bad card"
    assert any(
        what == f"skipped as head of orders[{head.partition}] by operator"
        for what, _ in job.history
    )
    [item] = claim("worker-b")
    assert item.job_id == ids[1]


def test_skip_of_the_last_head_ends_the_partition(operator_client):
    [only] = retrying("a", 1)
    response = operator_client.post(action_url(only, "skip"))
    assert messages_of(response) == [
        f"Job {only} skipped and cancelled; the partition has no more jobs."
    ]
    assert not PartitionHead.objects.exists()
    reason = get_job(only, namespace="tests").cancel_reason
    assert reason.startswith("Skipped as head of orders[")
    assert reason.endswith("by operator.")


def test_skip_of_a_stalled_running_head_fences_its_worker(operator_client):
    ids, stale = lapsed("a", 2)
    operator_client.post(action_url(ids[0], "skip"))
    assert stage(ids[0]) == "cancelled"
    assert not JobExecution.objects.filter(job_id=ids[0]).exists()
    assert PartitionHead.objects.get().job_id == ids[1]
    # The worker that stalled comes back and reports success: refused.
    assert finish("worker-a", stale) == []
    assert stage(ids[0]) == "cancelled"
    assert PartitionHead.objects.get().job_id == ids[1]


def test_skip_refuses_a_head_running_under_a_live_lease(operator_client):
    ids = enqueue("a", 2)
    claim("worker-a")
    response = operator_client.post(action_url(ids[0], "skip"))
    [message] = messages_of(response)
    assert "is running under a live lease of worker-a" in message
    assert stage(ids[0]) == "running"


def test_an_action_on_a_head_that_moved_on_is_refused(operator_client):
    ids = retrying("a", 2)
    url = action_url(ids[1], "skip")  # not the head
    response = operator_client.post(url)
    [message] = messages_of(response)
    assert message == (
        f"The head of orders[{partition_of(ids[0])}] is job {ids[0]!r}, not job {ids[1]!r}: "
        "the partition moved on meanwhile; look at it again."
    )
    assert stage(ids[0]) == "requeued"
    assert stage(ids[1]) == "enqueued"


def test_retry_now_makes_a_retrying_head_runnable_at_once(operator_client):
    ids = retrying("a", 2)
    before = timezone.now()
    response = operator_client.post(action_url(ids[0], "retry"))
    assert messages_of(response) == [
        f"Job {ids[0]}, head of orders[{partition_of(ids[0])}], may run again now."
    ]
    head = PartitionHead.objects.get()
    assert head.job_id == ids[0]
    assert head.available_at <= timezone.now()
    row = JobIndexRow.objects.get(job_id=ids[0])
    assert row.stage == "requeued"
    assert before <= row.run_at <= timezone.now()
    history = [what for what, _ in get_job(ids[0], namespace="tests").history]
    assert any(what.startswith("retry brought forward by operator (was due ") for what in history)
    [item] = claim("worker-b")
    assert (item.job_id, item.epoch) == (ids[0], 2)


def test_retry_now_refuses_a_head_that_is_not_retrying(operator_client):
    [idle] = untaken("a")
    response = operator_client.post(action_url(idle, "retry"))
    assert messages_of(response) == [
        f"Job {idle!r} is enqueued; only a requeued head (waiting for its retry) can be "
        "retried now."
    ]


def test_release_clears_the_owner_so_the_next_claim_fences_the_old_one(operator_client):
    ids = enqueue("a", 2)
    [stale] = claim("worker-a")  # a live lease: the worker may be stuck, not gone
    response = operator_client.post(action_url(ids[0], "release"))
    [message] = messages_of(response)
    assert message.startswith(f"Lease of orders[{partition_of(ids[0])}] released from worker-a;")
    lease = PartitionLease.objects.get()
    assert (lease.owner, lease.epoch) == (None, 1)
    assert lease.expires_at <= timezone.now()
    history = [what for what, _ in get_job(ids[0], namespace="tests").history]
    assert any("(owner worker-a, epoch 1) released by operator" in what for what in history)

    [taken] = claim("worker-b")
    assert (taken.job_id, taken.epoch) == (ids[0], 2)
    assert finish("worker-a", stale) == []  # the old owner's success is refused
    assert stage(ids[0]) == "running"
    assert PartitionHead.objects.get().job_id == ids[0]
    assert [w.job_id for w in finish("worker-b", taken)] == [ids[0]]
    assert PartitionHead.objects.get().job_id == ids[1]


def test_release_of_a_lapsed_lease_stops_its_owner_renewing_it(operator_client):
    from later_django.topics import upkeep

    ids, _ = lapsed("a", 1)
    operator_client.post(action_url(ids[0], "release"))
    assert upkeep.renew("tests", "worker-a", lease_seconds=30, using="default") == 0
    assert PartitionLease.objects.get().owner is None
    assert claim("worker-b")[0].epoch == 2


def test_release_refuses_a_partition_without_an_owner(operator_client):
    [idle] = untaken("a")
    response = operator_client.post(action_url(idle, "release"))
    [message] = messages_of(response)
    assert "has no owner to release" in message


@pytest.mark.parametrize("action", ["skip", "retry", "release"])
def test_a_viewer_may_not_act(viewer_client, action):
    ids = retrying("a")
    assert viewer_client.get(action_url(ids[0], action)).status_code == 403
    assert viewer_client.post(action_url(ids[0], action)).status_code == 403
    assert stage(ids[0]) == "requeued"
    assert PartitionHead.objects.get().available_at > timezone.now()


def test_actions_refuse_a_post_without_the_csrf_token(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    ids = retrying("a")
    for action in ("skip", "retry", "release"):
        assert client.post(action_url(ids[0], action)).status_code == 403
    assert stage(ids[0]) == "requeued"


def test_an_unknown_action_or_job_is_not_found(operator_client):
    ids = retrying("a")
    assert operator_client.get(action_url(ids[0], "explode")).status_code == 404
    missing = reverse("admin:later_dashboard_triage_action", args=["orders", 0, "skip"])
    assert operator_client.get(f"{missing}?job=01jnosuchjob00000000000000").status_code == 404
