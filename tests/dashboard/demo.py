"""Believable dashboard data for screenshots: a week of samples, metrics, workers, topics."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import msgpack
from croniter import croniter

from later_django.models import (
    JobIndexRow,
    JobTransitionMetric,
    JobWaitMetric,
    LogConsumerLease,
    LogConsumerOffset,
    LogPartition,
    PartitionHead,
    PartitionJob,
    PartitionLease,
    PartitionSequence,
    QueueSample,
    Schedule,
    Topic,
    Worker,
)
from later_django.records import new_job_id
from tests.db_state import count_new_rows


def fill(namespace: str, now: datetime) -> None:
    minute = now.replace(second=0, microsecond=0)
    week = [
        QueueSample(
            namespace=namespace,
            minute=minute - timedelta(minutes=m),
            queued=int(400 + 350 * math.sin(m / 180) + (900 if 2000 < m < 2100 else 0)),
            partitioned=int(60 + 40 * math.cos(m / 95)),
        )
        for m in range(0, 7 * 24 * 60, 5)
    ]
    QueueSample.objects.bulk_create(week, ignore_conflicts=True)
    hour = [
        QueueSample(
            namespace=namespace,
            minute=minute - timedelta(minutes=m),
            queued=int(420 + 120 * math.sin(m / 7)),
            partitioned=int(70 + 20 * math.cos(m / 5)),
        )
        for m in range(1, 60)
        if m % 5
    ]
    QueueSample.objects.bulk_create(hour, ignore_conflicts=True)
    JobTransitionMetric.objects.filter(namespace=namespace).delete()
    JobWaitMetric.objects.filter(namespace=namespace).delete()
    JobTransitionMetric.objects.bulk_create(
        JobTransitionMetric(
            namespace=namespace, stage=stage, bucket=minute - timedelta(minutes=m), count=count
        )
        for m in range(0, 61)
        for stage, count in (
            ("enqueued", 620 + m % 7 * 9),
            ("running", 610 + m % 5 * 8),
            ("success", 598 + m % 6 * 7),
            ("failed", 2 + m % 3),
            ("requeued", 9 + m % 4),
        )
    )
    JobWaitMetric.objects.bulk_create(
        JobWaitMetric(
            namespace=namespace, mode=mode, bucket=minute - timedelta(minutes=m), le_ms=le, count=n
        )
        for m in range(0, 61)
        for mode, bins in (
            ("regular", ((10, 300), (50, 220), (250, 70), (1000, 12))),
            ("sequential", ((50, 30), (500, 25), (5000, 4))),
        )
        for le, n in bins
    )
    for i, (host, age) in enumerate((("web-1", 2), ("web-2", 3), ("batch-1", 95))):
        Worker.objects.create(
            namespace=namespace,
            worker_id=f"{host}:{4100 + i}:{i:06x}",
            hostname=host,
            pid=4100 + i,
            queues=["default", "emails"] if i < 2 else ["slow"],
            concurrency=8,
            started_at=now - timedelta(hours=5),
            heartbeat_at=now - timedelta(seconds=age),
        )
    _topic(namespace, now)


# Heads of the demo topics: partition -> (head stage, task, queue, since, available_at,
# jobs queued, lease). ``since`` is when the head entered its stage; a lease is
# (owner, epoch, expiry).
WEB_1 = ("web-1:4100:000000", 4, 25)  # live
BATCH_1 = ("batch-1:4102:000002", 7, -360)  # expired six minutes ago: its worker died
HEADS: dict[str, dict[int, tuple]] = {
    "orders": {
        0: ("running", "shop.tasks.fulfil_order", "default", -2, 0, 3, WEB_1),
        1: ("delayed", "shop.tasks.fulfil_order", "default", -300, 1200, 5, None),
        2: ("requeued", "shop.tasks.charge_card", "default", -1080, 420, 42, None),
        3: ("waiting", "shop.tasks.ship_order", "default", -60, 365 * 86400, 1, None),
        5: ("running", "shop.tasks.fulfil_order", "default", -900, -360, 12, BATCH_1),
        6: ("enqueued", "shop.tasks.export_invoice", "reports", -2820, -2820, 4, None),
    },
    "payments": {
        1: ("requeued", "billing.tasks.capture_payment", "default", -240, 1560, 7, None),
    },
}


def _topic(namespace: str, now: datetime) -> None:
    for name, count in (("orders", 8), ("payments", 4)):
        Topic.objects.update_or_create(
            namespace=namespace,
            name=name,
            defaults={"partition_count": count, "created_at": now - timedelta(days=3)},
        )
    for topic, heads in HEADS.items():
        for partition, (stage, task, queue, since, available, queued, lease) in heads.items():
            head = _partition(namespace, now, topic, partition, stage, task, queue, queued)
            at = now + timedelta(seconds=available)
            JobIndexRow.objects.filter(job_id=head).update(
                transitioned_at=now + timedelta(seconds=since),
                run_at=at,
                attempts=3 if stage == "requeued" else 1 if stage == "running" else 0,
                worker_id=lease[0] if lease else None,
            )
            PartitionJob.objects.filter(job_id=head).update(available_at=at)
            PartitionHead.objects.create(
                namespace=namespace,
                topic=topic,
                partition=partition,
                sequence=1,
                job_id=head,
                available_at=at,
            )
            PartitionSequence.objects.create(
                namespace=namespace, topic=topic, partition=partition, next_sequence=queued + 1
            )
            if lease:
                PartitionLease.objects.create(
                    namespace=namespace,
                    topic=topic,
                    partition=partition,
                    owner=lease[0],
                    epoch=lease[1],
                    expires_at=now + timedelta(seconds=lease[2]),
                )
    _log(namespace, now)


def _partition(namespace, now, topic, partition, stage, task, queue, queued) -> str:
    """Queue ``queued`` jobs in a partition; return the head's id."""
    ids = [new_job_id() for _ in range(queued)]
    for sequence, job_id in enumerate(ids, start=1):
        head = sequence == 1
        row = JobIndexRow.objects.create(
            namespace=namespace,
            job_id=job_id,
            task_path=task,
            queue_name=queue,
            stage=stage if head else "enqueued",
            enqueued_at=now - timedelta(minutes=3 * (queued - sequence + 1)),
            transitioned_at=now - timedelta(minutes=queued - sequence + 1),
            topic=topic,
            partition=partition,
            sequence=sequence,
            parent_job_id=new_job_id() if head and stage == "waiting" else None,
        )
        count_new_rows(row)
        PartitionJob.objects.create(
            namespace=namespace,
            topic=topic,
            partition=partition,
            sequence=sequence,
            job_id=job_id,
            available_at=now,
        )
    return ids[0]


def _log(namespace: str, now: datetime) -> None:
    LogPartition.objects.create(namespace=namespace, topic="orders", partition=0, next_offset=1840)
    LogPartition.objects.create(namespace=namespace, topic="orders", partition=1, next_offset=1795)
    for group, offsets in (("billing", (1840, 1702)), ("analytics", (1200, 1795))):
        for partition, offset in enumerate(offsets):
            LogConsumerOffset.objects.create(
                namespace=namespace,
                group=group,
                topic="orders",
                partition=partition,
                next_offset=offset,
                updated_at=now,
            )
            LogConsumerLease.objects.create(
                namespace=namespace,
                group=group,
                topic="orders",
                partition=partition,
                owner=f"{group}-member-{partition}",
                epoch=3,
                expires_at=now + timedelta(seconds=20),
            )


# identifier -> (cron, task, kwargs, sequential, paused, the stage of its last occurrence's job)
SCHEDULES = {
    "nightly-sales-report": (
        "0 2 * * *",
        "reports.tasks.build_sales_report",
        {"region": "eu", "format": "xlsx"},
        False,
        False,
        "success",
    ),
    "stock-sync": (
        "*/15 * * * *",
        "warehouse.tasks.sync_stock",
        {"warehouse": "rotterdam"},
        False,
        False,
        "success",
    ),
    # Sequential and due: its last occurrence still runs, so the next one waits.
    "invoice-run": (
        "0 * * * *",
        "billing.tasks.issue_invoices",
        {"batch_size": 500},
        True,
        False,
        "running",
    ),
    "abandoned-carts": (
        "*/30 * * * *",
        "marketing.tasks.remind_abandoned_carts",
        {"older_than_hours": 4},
        False,
        False,
        "failed",
    ),
    "weekly-digest": (
        "0 8 * * 1",
        "marketing.tasks.send_weekly_digest",
        {},
        False,
        True,
        "success",
    ),
}


def schedules(namespace: str, now: datetime) -> None:
    """Schedules in every state but overdue, each with the job its last occurrence enqueued,
    their times where their cron strings put them."""
    for identifier, (cron, task, kwargs, sequential, paused, stage) in SCHEDULES.items():
        times = croniter(cron, now)
        next_run = times.get_next(datetime)
        times = croniter(cron, now)
        last_run = times.get_prev(datetime)
        if sequential:  # due now, held back by the occurrence before
            next_run, last_run = last_run, times.get_prev(datetime)
        job_id = new_job_id()
        count_new_rows(
            JobIndexRow.objects.create(
                namespace=namespace,
                job_id=job_id,
                task_path=task,
                queue_name="default",
                stage=stage,
                attempts=1,
                enqueued_at=last_run,
                started_at=last_run,
                transitioned_at=last_run + timedelta(seconds=40),
            )
        )
        Schedule.objects.create(
            namespace=namespace,
            identifier=identifier,
            cron=cron,
            time_zone="UTC",
            task_path=task,
            payload=msgpack.packb(
                {"args": [], "kwargs": kwargs, "queue_name": "default", "priority": 0}
            ),
            sequential=sequential,
            paused=paused,
            origin="code" if identifier == "stock-sync" else "settings",
            next_run_at=next_run,
            last_run_at=last_run,
            last_job_id=job_id,
            created_at=now - timedelta(days=30),
            updated_at=now - timedelta(days=2),
        )
