"""Believable dashboard data for screenshots: a week of samples, metrics, workers, topics."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

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
    Topic,
    Worker,
)


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


def _topic(namespace: str, now: datetime) -> None:
    Topic.objects.update_or_create(
        namespace=namespace,
        name="orders",
        defaults={"partition_count": 8, "created_at": now - timedelta(days=3)},
    )
    heads = {
        0: ("running", now, 3),
        1: ("delayed", now + timedelta(minutes=20), 5),
        2: ("requeued", now + timedelta(seconds=40), 2),
        3: ("waiting", now + timedelta(days=365), 1),
        5: ("enqueued", now, 12),
    }
    for partition, (stage, available_at, queued) in heads.items():
        for sequence in range(1, queued + 1):
            head = sequence == 1
            job_id = f"01jdemo{partition:02d}{sequence:017d}"
            JobIndexRow.objects.create(
                namespace=namespace,
                job_id=job_id,
                task_path="shop.tasks.fulfil_order",
                queue_name="default",
                stage=stage if head else "enqueued",
                attempts=2 if head and stage == "requeued" else 0,
                enqueued_at=now - timedelta(minutes=queued - sequence + 1),
                run_at=available_at if head else None,
                transitioned_at=now - timedelta(seconds=partition),
                topic="orders",
                partition=partition,
                sequence=sequence,
                parent_job_id="01jdemoparent0000000000000" if stage == "waiting" else None,
            )
            PartitionJob.objects.create(
                namespace=namespace,
                topic="orders",
                partition=partition,
                sequence=sequence,
                job_id=job_id,
                available_at=available_at if head else now,
            )
        PartitionHead.objects.create(
            namespace=namespace,
            topic="orders",
            partition=partition,
            sequence=1,
            job_id=f"01jdemo{partition:02d}{1:017d}",
            available_at=available_at,
        )
        PartitionSequence.objects.create(
            namespace=namespace, topic="orders", partition=partition, next_sequence=queued + 1
        )
    PartitionLease.objects.create(
        namespace=namespace,
        topic="orders",
        partition=0,
        owner="web-1:4100:000000",
        epoch=4,
        expires_at=now + timedelta(seconds=25),
    )
    PartitionLease.objects.create(
        namespace=namespace,
        topic="orders",
        partition=5,
        owner="batch-1:4102:000002",
        epoch=2,
        expires_at=now - timedelta(seconds=50),
    )
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
