"""Steps of the upgrade scenario, run as ``python -m later_upgrade.scenario STEP [IDS]``.

Each step prints one JSON object:

* ``about``: which later_django this process imported;
* ``first-attempt``: enqueue the job that fails once (a worker that claims one
  job then leaves it waiting for its retry);
* ``enqueue``: one of every other kind of work, left for the worker of the
  next release: a plain job, a delayed one, a parent with a continuation
  waiting on it, two jobs of one topic partition, a schedule and a record of
  the retained log;
* ``report IDS``: where each job stands (IDS is the JSON the steps printed,
  merged), what the schedule last fired, and the log record read back.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import django

django.setup()

from django.tasks import default_task_backend  # noqa: E402

import later_django  # noqa: E402
from later_django.log import append, read  # noqa: E402
from later_django.models import JobIndexRow  # noqa: E402

from . import tasks  # noqa: E402

SCHEDULE = "every-second"
LOG_TOPIC = "events"
LOG_KEY = "order-7"
LOG_PAYLOAD = b"\x00shipped\xff"


def about() -> dict[str, Any]:
    return {"version": later_django.__version__, "file": later_django.__file__}


def first_attempt() -> dict[str, Any]:
    return {"retrying": tasks.fails_once.enqueue("retrying").id}


def enqueue() -> dict[str, Any]:
    parent = tasks.plain.enqueue("parent")
    later_django.schedule(SCHEDULE, "* * * * * *", tasks.plain, "scheduled")
    partition, offset = append(LOG_TOPIC, LOG_KEY, LOG_PAYLOAD)
    return {
        "plain": tasks.plain.enqueue("plain").id,
        "delayed": tasks.plain.using(run_after=timedelta(seconds=1)).enqueue("delayed").id,
        "parent": parent.id,
        "child": tasks.plain.using(after=parent).enqueue("child").id,
        "first": tasks.ordered.using(partition_key="customer-1").enqueue("first").id,
        "second": tasks.ordered.using(partition_key="customer-1").enqueue("second").id,
        "log": [partition, offset],
    }


def job(job_id: str) -> dict[str, Any]:
    result = default_task_backend.get_result(job_id)
    row = JobIndexRow.objects.get(namespace="upgrade", job_id=job_id)
    successful = result.status == "SUCCESSFUL"
    return {
        "stage": row.stage,
        "status": str(result.status),
        "return_value": result.return_value if successful else None,
        "errors": [error.exception_class_path for error in result.errors],
        "started_at": result.started_at.isoformat() if result.started_at else None,
        "finished_at": result.finished_at.isoformat() if result.finished_at else None,
    }


def report(ids: dict[str, Any]) -> dict[str, Any]:
    jobs = {name: job(job_id) for name, job_id in ids.items() if name != "log"}
    [schedule] = [found for found in later_django.list_schedules() if found.identifier == SCHEDULE]
    fired = schedule.last_job_id
    partition, offset = ids["log"]
    records = read(LOG_TOPIC, partition, offset=offset, limit=1)
    return {
        "jobs": jobs,
        "schedule": {
            "next_run_at": schedule.next_run_at.isoformat(),
            "last_job": None if fired is None else {"id": fired, **job(fired)},
        },
        "log": [[record.key, record.payload.hex()] for record in records],
    }


def main(argv: list[str]) -> None:
    step = argv[0]
    if step == "about":
        found = about()
    elif step == "first-attempt":
        found = first_attempt()
    elif step == "enqueue":
        found = enqueue()
    elif step == "report":
        found = report(json.loads(argv[1]))
    else:
        raise SystemExit(
            f"unknown step {step!r}; the steps are about, first-attempt, enqueue, report"
        )
    print(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1:])
