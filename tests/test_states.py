"""The job state machine: one enum, one transition table the engine keeps to, one diagram."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from later_django import cancel, states
from later_django.engine.claiming import claim
from later_django.engine.outcomes import FAILED, RELEASE, RETRY, SUCCESS
from later_django.exceptions import InvalidTransition, LaterError
from later_django.jobs import cancel_job, retry_job
from later_django.models import DeliveryCommand, JobExecution, PartitionHead
from later_django.states import Stage, check_transition
from later_django.tasks_api import TaskResultStatus
from later_django.topics.registry import forget_layouts
from later_django.worker.maintenance import promote_due
from tests import tasks
from tests.continuations.inline import claim_ready, finish, stage_of
from tests.topics import helpers as topic
from tests.topics import tasks as topic_tasks

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "later_django"
WORDS = "|".join(Stage)
SQL_LITERAL = re.compile(rf"'({WORDS})'")

# Quoted words that equal a stage name but are not a stage: (file, source line) -> why.
NOT_STAGES = {
    (
        "later_django/engine/attempt.py",
        'SUCCESS, FAILED, RETRY, RELEASE = "success", "failed", "retry", "release"',
    ): "outcome kinds: what became of an attempt",
    (
        "later_django/worker/executing.py",
        'record.attempts[-1].outcome = "success"',
    ): "an attempt's outcome in the record, beside error, timeout, released and lost",
    (
        "later_django/engine/jobs.py",
        'def cancel_job(job_id: str, *, namespace: str, reason: str = "cancelled") -> None:',
    ): "the default cancel reason, stored as text",
    (
        "later_django/engine/jobs.py",
        'job_id, _current_stage(namespace, job_id, using), "cancelled", stages',
    ): "the verb's participle in the message 'can be cancelled'",
    (
        "later_django/dashboard/actions.py",
        'VERBS = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}',
    ): "verbs' participles for the dashboard's messages",
    (
        "later_django/dashboard/topics.py",
        'row.state = "running"',
    ): "a partition's state on the topics page, not a job's",
    (
        "later_django/dashboard/schedules.py",
        'return "waiting"',
    ): "a schedule's state on the schedules page, not a job's",
    (
        "later_django/metrics/collector.py",
        'PARTITION_STATES = ("idle", "ready", "running", "leased", "blocked")',
    ): "partition states in the metrics, not a job's",
}


def stage_literals(path: Path) -> Iterator[tuple[int, str]]:
    """(line, source line) of every string constant that is, or quotes in SQL, a stage name."""
    source = path.read_text()
    lines = source.splitlines()
    found = {
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (node.value in set(Stage) or SQL_LITERAL.search(node.value))
    }
    for line in sorted(found):
        yield line, lines[line - 1].strip()


def test_no_stage_is_spelled_as_a_string_outside_the_states_module():
    found, allowed_seen = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if "/migrations/" in relative or relative == "later_django/states.py":
            continue
        for line, text in stage_literals(path):
            if (relative, text) in NOT_STAGES:
                allowed_seen.add((relative, text))
            else:
                found.append(f"{relative}:{line}: {text}")
    assert found == [], "use later_django.states.Stage (or a group) instead:\n" + "\n".join(found)
    assert allowed_seen == set(NOT_STAGES), "stale entries in NOT_STAGES"


def test_the_scan_finds_a_stage_literal_in_python_and_in_sql(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'if stage == "failed":\n'
        "    sql = \"UPDATE t SET stage = 'cancelled'\"\n"
        'log("job failed while running")\n'
        "# a comment naming 'waiting' is prose\n"
    )
    assert [line for line, _ in stage_literals(sample)] == [1, 2]


def test_stage_values_are_the_stored_strings_and_need_no_sql_escaping():
    assert [str(s) for s in Stage] == [
        "delayed",
        "waiting",
        "enqueued",
        "running",
        "requeued",
        "success",
        "failed",
        "cancelled",
    ]
    assert all(re.fullmatch("[a-z]+", s) for s in Stage)
    assert f"'{Stage.CANCELLED}'" == "'cancelled'"
    assert states.sql_list(states.FINISHED) == "'success', 'failed', 'cancelled'"


def test_every_stage_has_a_django_task_status_as_the_spec_maps_it():
    assert set(states.STATUS) == set(Stage)
    ready = {s for s, status in states.STATUS.items() if status == TaskResultStatus.READY}
    assert ready == {Stage.DELAYED, Stage.WAITING, Stage.ENQUEUED, Stage.REQUEUED}
    assert states.STATUS[Stage.RUNNING] == TaskResultStatus.RUNNING
    assert states.STATUS[Stage.SUCCESS] == TaskResultStatus.SUCCESSFUL
    assert states.STATUS[Stage.FAILED] == states.STATUS[Stage.CANCELLED] == TaskResultStatus.FAILED


def test_the_groups_agree_with_the_transition_table():
    table = states.TRANSITIONS
    assert set(states.UNFINISHED) == set(states.PENDING) | {Stage.RUNNING}
    assert set(states.FINISHED) | set(states.UNFINISHED) == set(Stage)
    assert not set(states.FINISHED) & set(states.UNFINISHED)
    assert {s for s in Stage if Stage.CANCELLED in table.get(s, ())} == set(states.CANCELLABLE)
    # Finished stages are left only through retry_job.
    assert {s for s in states.FINISHED if table.get(s)} == set(states.RETRYABLE)
    assert all(
        e.event.startswith("retry") for e in states.TRANSITIONS_MADE if e.old in states.FINISHED
    )
    assert table[None] == {Stage.DELAYED, Stage.WAITING, Stage.ENQUEUED}
    for name in ("PENDING", "UNFINISHED", "FINISHED", "UNSUCCESSFUL", "RETRYABLE", "SCHEDULED"):
        group = getattr(states, name)
        assert list(group) == [s for s in Stage if s in group], f"{name} is not in Stage order"


def test_check_transition_allows_the_table_and_names_both_stages_and_the_options():
    check_transition(None, Stage.WAITING)
    check_transition("running", "success")
    with pytest.raises(InvalidTransition) as raised:
        check_transition("success", "running")
    assert isinstance(raised.value, LaterError)
    assert str(raised.value) == (
        "A job cannot go from stage 'success' to stage 'running'; "
        "from there it can move to no other stage."
    )
    with pytest.raises(InvalidTransition) as raised:
        check_transition("running", "waiting")
    assert str(raised.value) == (
        "A job cannot go from stage 'running' to stage 'waiting'; "
        "from there it can move to enqueued, running, requeued, success, failed, cancelled."
    )
    with pytest.raises(InvalidTransition, match="cannot be created to stage 'running'"):
        check_transition(None, "running")


def test_the_architecture_page_shows_the_diagram_the_table_draws():
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert f"```mermaid\n{states.mermaid()}```" in page
    edges = states.mermaid().splitlines()[1:]
    assert len(edges) == len(states.TRANSITIONS_MADE) + len(states.FINISHED)


# Observing the engine: a trigger notes every stage an index row is created in or set to.

SQLITE_OBSERVER = [
    "CREATE TABLE test_stage_change (id INTEGER PRIMARY KEY, old TEXT, new TEXT)",
    "CREATE TRIGGER test_stage_created AFTER INSERT ON later_jobs_index "
    "BEGIN INSERT INTO test_stage_change (old, new) VALUES (NULL, NEW.stage); END",
    "CREATE TRIGGER test_stage_changed AFTER UPDATE OF stage ON later_jobs_index "
    "BEGIN INSERT INTO test_stage_change (old, new) VALUES (OLD.stage, NEW.stage); END",
]
POSTGRES_OBSERVER = [
    "CREATE TABLE test_stage_change (id serial PRIMARY KEY, old text, new text)",
    "CREATE FUNCTION test_note_stage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO test_stage_change (old, new) VALUES "
    "(CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.stage END, NEW.stage); "
    "RETURN NULL; END $$",
    "CREATE TRIGGER test_stage_changed AFTER INSERT OR UPDATE OF stage ON later_jobs_index "
    "FOR EACH ROW EXECUTE FUNCTION test_note_stage()",
]


@pytest.fixture
def observed(db) -> Callable[[], set[tuple[str | None, str]]]:
    """The (old, new) stage pairs written to the index so far (rolled back with the test)."""
    forget_layouts()
    statements = POSTGRES_OBSERVER if connection.vendor == "postgresql" else SQLITE_OBSERVER
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)

    def pairs() -> set[tuple[str | None, str]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT old, new FROM test_stage_change")
            return set(cursor.fetchall())

    yield pairs
    forget_layouts()


def later(hours: float = 2):
    return timezone.now() + timedelta(hours=hours)


def test_every_stage_change_the_engine_makes_is_in_the_table_and_every_entry_happens(observed):
    # enqueue, claim and each outcome of a job without a topic
    succeeds = tasks.record.enqueue("states", "ok")
    fails = tasks.always_fails.enqueue("boom")
    retried_later = tasks.record.enqueue("states", "later")
    retried_now = tasks.record.enqueue("states", "now")
    released = tasks.record.enqueue("states", "released")
    lapsed = tasks.record.enqueue("states", "lapsed")
    claimed = {c.job_id: c for c in claim_ready()}
    finish([claimed[succeeds.id]], SUCCESS)
    finish([claimed[fails.id]], FAILED)
    finish([claimed[retried_later.id]], RETRY, retry_at=later())
    finish([claimed[retried_now.id]], RETRY, retry_at=timezone.now())
    finish([claimed[released.id]], RELEASE)
    # a lapsed execution lease, taken over by another worker (never by its own owner,
    # which still holds the job): the command's available_at is the lease expiry
    DeliveryCommand.objects.filter(job_id=lapsed.id).update(available_at=timezone.now())
    JobExecution.objects.filter(job_id=lapsed.id).update(lease_expires_at=timezone.now())
    taken = []
    while batch := claim("tests", "other", queues=None, free=16, lease_seconds=30, using="default"):
        taken += batch
    assert [c.job_id for c in taken if c.job_id == lapsed.id] == [lapsed.id]
    # promotion of a delayed job and of a due retry
    delayed = tasks.record.using(run_after=timedelta(hours=1)).enqueue("states", "delayed")
    assert set(promote_due("tests", using="default", now=later())) >= {
        delayed.id,
        retried_later.id,
    }
    # cancel_job of each pending stage; retry_job of a failed and a cancelled job
    cancel_job(delayed.id, namespace="tests")
    still_delayed = tasks.record.using(run_after=timedelta(hours=1)).enqueue("states", "cancel")
    cancel_job(still_delayed.id, namespace="tests")
    to_requeue = tasks.record.enqueue("states", "requeue then cancel")
    [item] = [c for c in claim_ready() if c.job_id == to_requeue.id]
    finish([item], RETRY, retry_at=later())
    cancel_job(to_requeue.id, namespace="tests")
    cancel_job(tasks.record.enqueue("states", "cancelled").id, namespace="tests")
    retry_job(fails.id, namespace="tests")
    retry_job(delayed.id, namespace="tests")
    # continuations: released at once or delayed, cancelled by a parent or by hand,
    # and a cancelled one retried while its parent is pending again
    parent = tasks.record.enqueue("states", "parent")
    child = tasks.record.using(after=parent).enqueue("states", "child")
    later_child = tasks.record.using(after=parent, run_after=timedelta(hours=1)).enqueue("s", "c")
    by_hand = tasks.record.using(after=parent).enqueue("states", "by hand")
    cancel_job(by_hand.id, namespace="tests")
    [item] = [c for c in claim_ready() if c.job_id == parent.id]
    finish([item], SUCCESS)
    assert (stage_of(child.id), stage_of(later_child.id)) == (Stage.ENQUEUED, Stage.DELAYED)
    doomed_parent = tasks.record.enqueue("states", "doomed parent")
    doomed = tasks.record.using(after=doomed_parent).enqueue("states", "doomed")
    [item] = [c for c in claim_ready() if c.job_id == doomed_parent.id]
    finish([item], FAILED)
    assert stage_of(doomed.id) == Stage.CANCELLED
    cancelled_parent = tasks.record.enqueue("states", "cancelled parent")
    orphan = tasks.record.using(after=cancelled_parent).enqueue("states", "orphan")
    cancel_job(cancelled_parent.id, namespace="tests")
    retry_job(cancelled_parent.id, namespace="tests")
    retry_job(orphan.id, namespace="tests")
    assert stage_of(orphan.id) == Stage.WAITING
    # cancel of running jobs: asked (the outcome that follows ends it cancelled), and at
    # once when its lease has lapsed
    asked = tasks.record.enqueue("states", "asked")
    stalled = tasks.record.enqueue("states", "stalled")
    claimed = {c.job_id: c for c in claim_ready()}
    assert cancel(asked.id) == Stage.RUNNING
    finish([claimed[asked.id]], FAILED)
    assert stage_of(asked.id) == Stage.CANCELLED
    JobExecution.objects.filter(job_id=stalled.id).update(lease_expires_at=timezone.now())
    assert cancel(stalled.id) == Stage.CANCELLED
    # partition heads: delayed and requeued heads are claimed when due, without promotion
    head = topic_tasks.step.using(partition_key="a", run_after=timedelta(hours=1)).enqueue("a", 0)
    PartitionHead.objects.update(available_at=timezone.now())
    [item] = topic.claim("worker-a")
    assert item.job_id == head.id
    topic.finish("worker-a", item, RETRY, retry_in=3600)
    topic.lapse()
    [item] = topic.claim("worker-b")
    topic.lapse()
    [item] = topic.claim("worker-c")
    assert stage_of(head.id) == Stage.RUNNING

    seen = observed()
    table = {(e.old, e.new) for e in states.TRANSITIONS_MADE}
    assert seen - table == set(), "the engine made changes the table does not allow"
    assert table - seen == set(), "the table allows changes no scenario made"
