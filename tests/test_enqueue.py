"""The enqueue write path: rows written, transactions, bulk enqueue, and bad input."""

import re
from contextlib import nullcontext
from copy import copy
from datetime import datetime, timedelta
from types import MappingProxyType

import pytest
from asgiref.sync import async_to_sync
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from later_django.engine.enqueue import STREAMED_BATCH
from later_django.exceptions import InvalidArgument, InvalidCall, LaterError, SerializationError
from later_django.models import DeliveryCommand, JobIndexRow, StorageValue
from later_django.records import JobRecord
from later_django.tasks_api import DummyBackend, InvalidTask, TaskResultStatus, task_enqueued
from tests import tasks
from tests.db_state import later_row_counts, stage_counts
from tests.models import Order

pytestmark = pytest.mark.django_db
committing = pytest.mark.django_db(transaction=True)

NAMESPACE = "tests"
# More jobs than one batch: on PostgreSQL they go in batches of STREAMED_BATCH, in one
# transaction.
MANY = 2 * STREAMED_BATCH + 7
ALLOWED = (
    "task arguments must be JSON values: None, bool, int, float, str, and lists and dicts "
    "(with str keys) of them."
)


def stored_record(job_id: str) -> JobRecord:
    raw = StorageValue.objects.get(namespace=NAMESPACE, key=f"job:{job_id}").value
    return JobRecord.decode(bytes(raw), job_id=job_id)


def test_enqueue_stores_record_index_row_and_queue_command():
    result = tasks.add.using(priority=5, queue_name="slow").enqueue(2, b=3)

    assert result.status == TaskResultStatus.READY
    assert len(result.id) == 26
    assert result.id == result.id.lower()
    record = stored_record(result.id)
    assert (record.task_path, record.args, record.kwargs) == ("tests.tasks.add", [2], {"b": 3})
    assert (record.queue_name, record.priority, record.max_attempts) == ("slow", 5, 1)
    row = JobIndexRow.objects.get(job_id=result.id)
    assert (row.namespace, row.stage, row.attempts, row.priority) == (NAMESPACE, "enqueued", 0, 5)
    command = DeliveryCommand.objects.get(job_id=result.id)
    assert (command.queue_name, command.priority, command.lease_owner) == ("slow", 5, None)
    assert stage_counts(NAMESPACE) == {"enqueued": 1}


def test_task_max_attempts_and_timeout_are_stored_with_the_job():
    failing = tasks.always_fails.enqueue("x")
    slow = tasks.too_slow_python.enqueue()
    assert stored_record(failing.id).max_attempts == 3
    assert stored_record(slow.id).timeout == 0.5


def test_a_job_to_run_later_is_delayed_and_not_queued():
    result = tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 1)

    row = JobIndexRow.objects.get(job_id=result.id)
    assert row.stage == "delayed"
    assert row.run_at > timezone.now() + timedelta(minutes=59)
    assert not DeliveryCommand.objects.filter(job_id=result.id).exists()
    assert result.status == TaskResultStatus.READY


def test_a_run_after_in_the_past_is_queued_at_once():
    result = tasks.add.using(run_after=timezone.now() - timedelta(seconds=5)).enqueue(1, 1)
    assert JobIndexRow.objects.get(job_id=result.id).stage == "enqueued"
    assert DeliveryCommand.objects.filter(job_id=result.id).exists()


def test_enqueue_sends_task_enqueued_with_the_result():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.id, task_result.status))

    task_enqueued.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 2)
    finally:
        task_enqueued.disconnect(receiver)
    assert [(s.__name__, i, st) for s, i, st in seen] == [
        ("LaterBackend", result.id, TaskResultStatus.READY)
    ]


def test_enqueue_many_sends_task_enqueued_once_per_job():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        results = tasks.add.enqueue_many([((i, i), {}) for i in range(3)])
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [r.id for r in results]


def test_aenqueue_stores_the_job_like_enqueue():
    result = async_to_sync(tasks.async_add.aenqueue)(4, 5)
    assert stored_record(result.id).task_path == "tests.tasks.async_add"
    assert JobIndexRow.objects.get(job_id=result.id).stage == "enqueued"


@committing
def test_enqueue_inside_a_rolled_back_transaction_leaves_no_row_in_any_later_table():
    before = later_row_counts()

    def enqueue_then_fail():
        with transaction.atomic():
            Order.objects.create(reference="A-1")
            tasks.add.enqueue(1, 2)
            tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 2)
            tasks.add.enqueue_many([((i, i), {}) for i in range(3)])
            tasks.add.enqueue_many([((i, i), {}) for i in range(MANY)])
            raise RuntimeError("abandon")

    with pytest.raises(RuntimeError, match=r"^abandon$"):
        enqueue_then_fail()

    assert later_row_counts() == before
    assert not Order.objects.exists()


@committing
def test_enqueue_inside_a_committed_transaction_commits_with_the_callers_rows():
    before = later_row_counts()
    with transaction.atomic():
        Order.objects.create(reference="A-2")
        result = tasks.add.enqueue(1, 2)
    after = later_row_counts()

    assert Order.objects.filter(reference="A-2").exists()
    assert JobIndexRow.objects.filter(job_id=result.id).exists()
    assert {
        table: after[table] - before[table] for table in after if after[table] != before[table]
    } == {
        "later_storage": 1,
        "later_jobs_index": 1,
        "later_delivery_queue": 1,
        "later_stage_counts": 1,
    }


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            ({1, 2}, 1),
            {},
            "Argument #0 (positional) of task 'tests.tasks.add' is {1, 2} of type set; " + ALLOWED,
        ),
        (
            (1,),
            {"b": object},
            "Argument 'b' of task 'tests.tasks.add' is <class 'object'> of type type; " + ALLOWED,
        ),
        (
            (1, {"when": timezone}),
            {},
            "Argument #1 (positional) of task 'tests.tasks.add' is {'when': <module "
            "'django.utils.timezone' from",
        ),
        (
            (1, 2**70),
            {},
            "Argument #1 (positional) of task 'tests.tasks.add' is 1180591620717411303424 of "
            f"type int; {ALLOWED}",
        ),
        (
            (1, 2**64),
            {},
            f"Argument #1 (positional) of task 'tests.tasks.add' is {2**64} of type int; "
            + ALLOWED,
        ),
        (
            (1,),
            {"b": -(2**63) - 1},
            f"Argument 'b' of task 'tests.tasks.add' is {-(2**63) - 1} of type int; " + ALLOWED,
        ),
    ],
)
def test_an_argument_that_cannot_be_stored_is_refused_by_name_before_anything_is_stored(
    args, kwargs, message
):
    before = later_row_counts()
    with pytest.raises(SerializationError) as raised:
        tasks.add.enqueue(*args, **kwargs)
    assert str(raised.value).startswith(message)
    # Django's own backends raise TypeError here; ours stays a ValueError as it always was.
    assert isinstance(raised.value, TypeError)
    assert isinstance(raised.value, InvalidArgument)
    assert later_row_counts() == before


def test_integers_at_the_edges_of_what_msgpack_carries_are_stored():
    result = tasks.add.enqueue(2**64 - 1, -(2**63))
    assert stored_record(result.id).args == [2**64 - 1, -(2**63)]


def test_arguments_are_normalised_as_django_would_return_them():
    result = tasks.add.enqueue((1, 2), {"k": (3,)})
    assert result.args == [[1, 2], {"k": [3]}]
    assert stored_record(result.id).args == [[1, 2], {"k": [3]}]


def test_bad_options_are_refused_with_djangos_sentence_then_the_value():
    before = later_row_counts()
    with pytest.raises(InvalidTask) as raised:
        tasks.add.using(queue_name="nope").enqueue(1, 2)
    assert str(raised.value) == (
        "Queue 'nope' is not valid for backend. queue_name is 'nope'; it must be one of the "
        "QUEUES of task backend 'default': default, emails, slow."
    )
    with pytest.raises(InvalidTask) as raised:
        tasks.add.using(priority=200).enqueue(1, 2)
    assert str(raised.value) == (
        "priority must be a whole number between -100 and 100. It is 200; higher runs first."
    )
    with pytest.raises(InvalidTask, match=r"^priority must be a whole number between -100 and"):
        tasks.add.using(priority="high").enqueue(1, 2)
    naive = timezone.now().replace(tzinfo=None)
    with pytest.raises(InvalidTask) as raised:
        tasks.add.using(run_after=naive).enqueue(1, 2)
    assert str(raised.value) == (
        f"run_after must be an aware datetime. It is {naive!r}, a naive datetime; with "
        "USE_TZ = True use an aware datetime or a timedelta from now."
    )
    assert later_row_counts() == before


def unvalidated(task, **changes):
    """A copy of ``task`` with ``changes`` set without our backend validating them."""
    changed = copy(task)
    for name, value in changes.items():
        object.__setattr__(changed, name, value)
    return changed


@pytest.mark.parametrize(
    ("options", "django_sentence"),
    [
        ({"queue_name": "nope"}, "Queue 'nope' is not valid for backend."),
        ({"priority": 101}, "priority must be a whole number between -100 and 100."),
        ({"priority": -101}, "priority must be a whole number between -100 and 100."),
    ],
)
def test_messages_start_with_the_sentence_djangos_own_backends_use(options, django_sentence):
    # Django's DummyBackend (same QUEUES) is the reference: its wording must prefix ours.
    dummy = DummyBackend("dummy", {"QUEUES": ["default", "emails", "slow"]})
    with pytest.raises(InvalidTask) as by_django:
        dummy.validate_task(unvalidated(tasks.add, **options))
    assert str(by_django.value) == django_sentence
    with pytest.raises(InvalidTask, match=f"^{re.escape(django_sentence)} "):
        tasks.add.using(**options)


def test_a_naive_run_after_is_refused_with_djangos_sentence_when_use_tz_is_on():
    naive = datetime(2030, 1, 1, 12, 0)
    dummy = DummyBackend("dummy", {})
    with pytest.raises(InvalidTask) as by_django:
        dummy.validate_task(unvalidated(tasks.add, run_after=naive))
    assert str(by_django.value) == "run_after must be an aware datetime."
    with pytest.raises(InvalidTask, match=r"^run_after must be an aware datetime\. It is "):
        tasks.add.using(run_after=naive)


def test_enqueue_many_stores_every_call_and_returns_their_results():
    results = tasks.add.enqueue_many([((i,), {"b": 10}) for i in range(20)])

    assert [r.args for r in results] == [[i] for i in range(20)]
    assert all(r.kwargs == {"b": 10} and r.status == TaskResultStatus.READY for r in results)
    assert len({r.id for r in results}) == 20
    assert JobIndexRow.objects.filter(stage="enqueued").count() == 20
    assert DeliveryCommand.objects.count() == 20
    assert stage_counts(NAMESPACE) == {"enqueued": 20}


def test_enqueue_many_of_nothing_writes_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert tasks.add.enqueue_many([]) == []


@committing
def test_enqueue_many_is_one_round_trip_up_to_a_batch_of_jobs(django_assert_num_queries):
    # PostgreSQL: one statement (a CTE of three inserts over arrays), in autocommit.
    # SQLite: BEGIN IMMEDIATE, the write-lock statement, one executemany per table, COMMIT.
    expected = 1 if connection.vendor == "postgresql" else 6
    for count in (1, STREAMED_BATCH):
        with django_assert_num_queries(expected):
            tasks.add.enqueue_many([((i, i), {}) for i in range(count)])
    assert JobIndexRow.objects.count() == 1 + STREAMED_BATCH


@committing
def test_enqueue_many_inside_a_transaction_adds_only_the_inserts(django_assert_num_queries):
    expected = 1 if connection.vendor == "postgresql" else 3
    with transaction.atomic(), django_assert_num_queries(expected):
        tasks.add.enqueue_many([((i, i), {}) for i in range(30)])


@committing
def test_enqueue_many_of_more_than_a_batch_stores_every_call_in_order():
    stored_when_sent = []

    def receiver(sender, task_result, **kwargs):
        stored_when_sent.append(JobIndexRow.objects.filter(job_id=task_result.id).exists())

    task_enqueued.connect(receiver)
    try:
        results = tasks.add.enqueue_many([((i,), {"b": 1}) for i in range(MANY)])
    finally:
        task_enqueued.disconnect(receiver)

    assert [r.args for r in results] == [[i] for i in range(MANY)]
    ids = [r.id for r in results]
    assert len(set(ids)) == MANY
    stamps = [i[:10] for i in ids]  # a ULID's time, to the millisecond
    assert stamps == sorted(stamps)
    assert stored_when_sent == [True] * MANY  # each signal once, after its job is stored
    assert JobIndexRow.objects.filter(stage="enqueued").count() == MANY
    assert DeliveryCommand.objects.count() == MANY
    assert stage_counts(NAMESPACE) == {"enqueued": MANY}
    assert stored_record(ids[-1]).args == [MANY - 1]
    first = [r.id for r in results[: STREAMED_BATCH + 1]]
    queued = DeliveryCommand.objects.order_by("-priority", "available_at", "id")
    assert list(queued.values_list("job_id", flat=True)[: STREAMED_BATCH + 1]) == first


@committing
def test_enqueue_many_of_more_than_a_batch_with_a_bad_call_in_the_last_batch_stores_nothing():
    calls = [((i, i), {}) for i in range(MANY)]
    calls[MANY - 2] = ((1, {2}), {})
    before = later_row_counts()
    with transaction.atomic():
        Order.objects.create(reference="kept")
        with pytest.raises(SerializationError, match=r"^Argument #1 \(positional\) of task"):
            tasks.add.enqueue_many(calls)
        Order.objects.create(reference="kept too")  # the caller's transaction is still usable
    assert later_row_counts() == before
    assert Order.objects.count() == 2


@committing
@pytest.mark.parametrize("inside_a_transaction", [True, False])
def test_a_call_of_the_wrong_shape_in_a_later_batch_is_named_and_stores_nothing(
    inside_a_transaction,
):
    # Batches after the first are checked while the ones before are written: the error
    # still names the call by its place in the whole list, and nothing is kept.
    calls: list = [((i, i), {}) for i in range(MANY)]
    bad = STREAMED_BATCH + 3
    calls[bad] = ((1,), None)
    before = later_row_counts()
    with transaction.atomic() if inside_a_transaction else nullcontext():
        Order.objects.create(reference="kept")
        with pytest.raises(InvalidCall, match=rf"^enqueue_many: calls\[{bad}\] has kwargs None"):
            tasks.add.enqueue_many(calls)
        Order.objects.create(reference="kept too")
    assert later_row_counts() == before
    assert Order.objects.count() == 2


@committing
def test_a_database_error_in_a_later_batch_stores_none_of_the_batches(monkeypatch):
    [taken] = tasks.add.enqueue_many([((0, 0), {})])
    before = later_row_counts()
    ids = iter(range(MANY))

    def colliding_ids() -> str:  # the last batch reuses the id of the job already stored
        number = next(ids)
        return taken.id if number == MANY - 1 else f"{number:026d}"

    monkeypatch.setattr("later_django.backend.new_job_id", colliding_ids)
    with pytest.raises(IntegrityError):
        tasks.add.enqueue_many([((i, i), {}) for i in range(MANY)])
    assert later_row_counts() == before
    # The connection is fit for the next enqueue.
    monkeypatch.undo()
    assert JobIndexRow.objects.filter(job_id=tasks.add.enqueue(1, 1).id).exists()


@committing
def test_an_enqueue_that_fails_in_a_transaction_marks_it_for_rollback(monkeypatch):
    # As a failed Model.save() does: the block's next query says why it cannot run,
    # and the block's rows go with the job.
    taken = tasks.add.enqueue(0, 0)
    before = later_row_counts()
    monkeypatch.setattr("later_django.backend.new_job_id", lambda: taken.id)
    with transaction.atomic():
        Order.objects.create(reference="undone")
        with pytest.raises(IntegrityError):
            tasks.add.enqueue(1, 1)
        with pytest.raises(transaction.TransactionManagementError, match="end of the 'atomic'"):
            Order.objects.count()
    assert later_row_counts() == before
    assert not Order.objects.exists()


def test_enqueue_many_with_one_bad_call_stores_none_of_them():
    before = later_row_counts()
    with pytest.raises(SerializationError, match=r"^Argument #1 \(positional\) of task"):
        tasks.add.enqueue_many([((1, 2), {}), ((3, {4}), {})])
    with pytest.raises(InvalidArgument) as raised:
        tasks.add.enqueue_many([((1, 2), {}), [(1, 2), {}]])
    assert str(raised.value) == (
        "enqueue_many: calls[1] is [(1, 2), {}]; it must be an (args, kwargs) tuple."
    )
    assert later_row_counts() == before


@pytest.mark.parametrize(
    ("bad_call", "message"),
    [
        (
            ("ab", {}),
            "enqueue_many: calls[2] has args 'ab' of type str; args must be a list or tuple "
            "(use () for none).",
        ),
        (
            ({1, 2}, {}),
            "enqueue_many: calls[2] has args {1, 2} of type set; args must be a list or tuple "
            "(use () for none).",
        ),
        (
            ((1, 2), None),
            "enqueue_many: calls[2] has kwargs None of type NoneType; kwargs must be a dict "
            "(use {} for none).",
        ),
        (
            ((1,), [("b", 2)]),
            "enqueue_many: calls[2] has kwargs [('b', 2)] of type list; kwargs must be a dict "
            "(use {} for none).",
        ),
        (
            ((), {"a": 1, 1: 2}),
            "enqueue_many: calls[2] has the keyword 1 of type int; keyword names must be str.",
        ),
        (((1, 2),), "enqueue_many: calls[2] is ((1, 2),); it must be an (args, kwargs) tuple."),
    ],
)
def test_enqueue_many_refuses_a_call_of_the_wrong_shape_and_stores_no_call(bad_call, message):
    before = later_row_counts()
    calls = [((1, 2), {}), ([3], {"b": 4}), bad_call, ((5, 6), {})]
    with pytest.raises(InvalidCall) as raised:
        tasks.add.enqueue_many(calls)
    assert str(raised.value) == message
    # What Django raises for arguments of the wrong type, and what callers already catch.
    assert isinstance(raised.value, TypeError)
    assert isinstance(raised.value, LaterError)
    assert isinstance(raised.value, InvalidArgument)
    assert later_row_counts() == before


def test_enqueue_many_accepts_list_args_and_any_mapping_as_kwargs():
    results = tasks.add.enqueue_many([([1, 2], {}), ((3,), MappingProxyType({"b": 4}))])
    assert [(r.args, r.kwargs) for r in results] == [([1, 2], {}), ([3], {"b": 4})]
    assert [stored_record(r.id).kwargs for r in results] == [{}, {"b": 4}]
