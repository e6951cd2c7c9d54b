"""Consumer groups over the retained log: poll, commit and leave, with fenced leases.

Members of a group share a topic's partitions by rendezvous hashing over the
live members, evenly (each holds ``count // members`` partitions or one more);
each partition a member reads is held through a lease in
``later_log_consumer_lease`` whose epoch rises whenever another member takes
it over. A commit is stored only while the committer's owner and epoch still
match, so a member that stalled and lost its partitions cannot move the
group's offsets. ``leave()`` releases leases at once; a member that stops
polling is replaced once its ``session_seconds`` (30 by default) pass.

``consume(handler)`` runs a handler's writes and the commit of the offsets
past the records it handled in one transaction, so each record's effect on
the log's database happens exactly once (docs/exactly-once.md).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta

from django.utils import timezone

from ..db import connection_for, to_db, write_transaction
from ..exceptions import InvalidArgument, LeaseLost
from ..options import validate_name
from ..sql import dialect
from ..topics.assignment import spread
from ..topics.registry import partition_count
from .records import Record, log_backend, read

SESSION_SECONDS = 30.0


def group_owners(group: str, topic: str, count: int, members: list[str]) -> list[str]:
    """The member each partition prefers: the same even rendezvous spread as topic
    partitions over workers, with the group as part of the name being hashed."""
    return spread(f"{group}\0{topic}", count, members)


class Consumer:
    """One member of consumer group ``group`` reading ``topic``.

    Use as a context manager, or call ``leave()`` when done::

        with Consumer("billing", "orders") as consumer:
            for record in consumer.poll():
                handle(record)
            consumer.commit()

    or, to apply each record's database writes exactly once::

        with Consumer("billing", "orders") as consumer:
            while running:
                consumer.consume(apply_records)  # its writes and the commit: one transaction
    """

    def __init__(
        self,
        group: str,
        topic: str,
        *,
        member_id: str | None = None,
        backend: str = "default",
        session_seconds: float = SESSION_SECONDS,
    ) -> None:
        self.backend = log_backend(backend)
        self.alias = backend
        self.group = validate_name("group", group)
        self.topic = topic
        self.count = partition_count(self.backend, topic)
        self.member_id = validate_name("member_id", member_id or secrets.token_hex(8))
        if isinstance(session_seconds, bool) or not isinstance(session_seconds, int | float):
            raise InvalidArgument(f"session_seconds is {session_seconds!r}; it must be a number.")
        if session_seconds < 1:
            raise InvalidArgument(f"session_seconds is {session_seconds!r}; it must be >= 1.")
        self.session = timedelta(seconds=session_seconds)
        self.leases: dict[int, int] = {}  # partition -> epoch this member holds
        self.positions: dict[int, int] = {}  # partition -> next offset to hand out
        self.polled: dict[int, int] = {}  # partition -> offset after the last record handed out

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()

    # -- membership and leases --------------------------------------------------------------

    def _rebalance(self) -> None:
        connection = connection_for(self.backend.database)
        now = timezone.now()
        ns, group = self.backend.namespace, self.group
        with write_transaction(self.backend.database) as cursor:
            cursor.execute(
                'INSERT INTO later_log_consumer_member (namespace, "group", member_id, joined_at, '
                'heartbeat_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, "group", '
                "member_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
                [ns, group, self.member_id, to_db(connection, now), to_db(connection, now)],
            )
            cursor.execute(
                "SELECT member_id FROM later_log_consumer_member WHERE namespace = %s "
                'AND "group" = %s AND heartbeat_at > %s',
                [ns, group, to_db(connection, now - self.session)],
            )
            members = sorted(row[0] for row in cursor.fetchall())
            owners = group_owners(group, self.topic, self.count, members)
            mine = {p for p, owner in enumerate(owners) if owner == self.member_id}
            expires = to_db(connection, now + self.session)
            # One pass in partition order, letting go and taking alike: two members
            # trading partitions then lock the lease rows in the same order, where
            # releasing all first and taking after could deadlock them.
            for partition in sorted(set(self.leases) | mine):
                if partition not in mine:
                    self._release(cursor, partition)
                    continue
                cursor.execute(
                    'INSERT INTO later_log_consumer_lease (namespace, "group", topic, partition, '
                    "owner, epoch, expires_at) VALUES (%s, %s, %s, %s, %s, 1, %s) "
                    'ON CONFLICT (namespace, "group", topic, partition) DO UPDATE SET '
                    "owner = excluded.owner, expires_at = excluded.expires_at, "
                    "epoch = CASE WHEN later_log_consumer_lease.owner = excluded.owner "
                    "THEN later_log_consumer_lease.epoch "
                    "ELSE later_log_consumer_lease.epoch + 1 END "
                    "WHERE later_log_consumer_lease.owner IS NULL "
                    "OR later_log_consumer_lease.owner = excluded.owner "
                    "OR later_log_consumer_lease.expires_at < %s RETURNING epoch",
                    [
                        ns,
                        group,
                        self.topic,
                        partition,
                        self.member_id,
                        expires,
                        to_db(connection, now),
                    ],
                )
                row = cursor.fetchone()
                if row is None:  # its previous owner still holds it; it lets go on its next poll
                    self._forget(partition)
                    continue
                if self.leases.get(partition) != row[0]:
                    self.positions.pop(partition, None)  # newly taken: start from the commit
                self.leases[partition] = row[0]
            missing = [p for p in self.leases if p not in self.positions]
            if missing:
                cursor.execute(
                    "SELECT partition, next_offset FROM later_log_consumer_offset "
                    'WHERE namespace = %s AND "group" = %s AND topic = %s',
                    [ns, group, self.topic],
                )
                committed = dict(cursor.fetchall())
                for partition in missing:
                    self.positions[partition] = committed.get(partition, 0)

    def _release(self, cursor: object, partition: int) -> None:
        cursor.execute(  # type: ignore[attr-defined]
            "UPDATE later_log_consumer_lease SET owner = NULL, expires_at = NULL "
            'WHERE namespace = %s AND "group" = %s AND topic = %s AND partition = %s '
            "AND owner = %s",
            [self.backend.namespace, self.group, self.topic, partition, self.member_id],
        )
        self._forget(partition)

    def _forget(self, partition: int) -> None:
        self.leases.pop(partition, None)
        self.positions.pop(partition, None)
        self.polled.pop(partition, None)

    @property
    def partitions(self) -> list[int]:
        """The partitions this member held at its last poll."""
        return sorted(self.leases)

    # -- reading and committing -------------------------------------------------------------

    def poll(self, max_records: int = 100) -> list[Record]:
        """Heartbeat, rebalance, and return up to ``max_records`` new records of owned partitions.

        Records handed out are not committed: call ``commit()`` once they are
        handled. Uncommitted records are delivered again after a rebalance.
        """
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise InvalidArgument(
                f"max_records is {max_records!r}; it must be a whole number >= 1."
            )
        self._rebalance()
        records: list[Record] = []
        for partition in self.partitions:
            room = max_records - len(records)
            if room <= 0:
                break
            batch = read(
                self.topic,
                partition,
                self.positions[partition],
                limit=min(room, 1000),
                backend=self.alias,
            )
            if batch:
                self.positions[partition] = batch[-1].offset + 1
                self.polled[partition] = batch[-1].offset + 1
                records.extend(batch)
        return records

    def commit(self, offsets: dict[int, int] | None = None) -> None:
        """Store the group's next offset per partition: by default, past every record polled.

        Raises LeaseLost, storing nothing, if this member no longer owns one of the
        partitions at the epoch it read them under.
        """
        wanted = dict(self.polled if offsets is None else offsets)
        if not wanted:
            return
        connection = connection_for(self.backend.database)
        ns = self.backend.namespace
        with write_transaction(self.backend.database) as cursor:
            for partition in sorted(wanted):
                epoch = self.leases.get(partition)
                cursor.execute(
                    "SELECT owner, epoch FROM later_log_consumer_lease WHERE namespace = %s "
                    'AND "group" = %s AND topic = %s AND partition = %s' + dialect(connection).LOCK,
                    [ns, self.group, self.topic, partition],
                )
                row = cursor.fetchone()
                if epoch is None or row is None or row[0] != self.member_id or row[1] != epoch:
                    self._forget(partition)
                    raise LeaseLost(
                        f"Member {self.member_id!r} of group {self.group!r} no longer owns "
                        f"{self.topic!r} partition {partition} (held epoch {epoch!r}, now "
                        f"{row[1] if row else None!r} by {row[0] if row else None!r}); "
                        "its commit was refused and nothing was stored."
                    )
                cursor.execute(
                    'INSERT INTO later_log_consumer_offset (namespace, "group", topic, partition, '
                    "next_offset, updated_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT "
                    '(namespace, "group", topic, partition) DO UPDATE SET '
                    "next_offset = excluded.next_offset, updated_at = excluded.updated_at",
                    [
                        ns,
                        self.group,
                        self.topic,
                        partition,
                        wanted[partition],
                        to_db(connection, timezone.now()),
                    ],
                )
        for partition in wanted:
            self.polled.pop(partition, None)

    def consume(self, handler: Callable[[list[Record]], object], max_records: int = 100) -> int:
        """Poll, and handle the records in one transaction with the commit of their offsets.

        ``handler(records)`` runs inside a transaction on the log's database.
        Once it returns, the group's offsets past those records are committed
        in that same transaction, so the handler's writes there and the
        commit land together or not at all. If the handler raises, or this
        member lost one of the partitions (``LeaseLost``), the transaction
        rolls back, the exception propagates, and the records are delivered
        again by the next poll, to this member or to the partition's new
        owner. Returns how many records were handled; with none waiting, the
        handler is not called and 0 is returned.
        """
        if not callable(handler):
            raise InvalidArgument(f"handler is {handler!r}; it must be a callable(records).")
        records = self.poll(max_records)
        if not records:
            return 0
        offsets: dict[int, int] = {}
        for record in records:
            offsets[record.partition] = max(offsets.get(record.partition, 0), record.offset + 1)
        try:
            with write_transaction(self.backend.database):
                handler(records)
                self.commit(offsets)
        except BaseException:
            # Nothing was committed: read these partitions from the group's offsets again.
            for partition in offsets:
                self.positions.pop(partition, None)
                self.polled.pop(partition, None)
            raise
        return len(records)

    def leave(self) -> None:
        """Release every lease and leave the group, so others take over at once."""
        with write_transaction(self.backend.database) as cursor:
            for partition in sorted(self.leases):
                self._release(cursor, partition)
            cursor.execute(
                'DELETE FROM later_log_consumer_member WHERE namespace = %s AND "group" = %s '
                "AND member_id = %s",
                [self.backend.namespace, self.group, self.member_id],
            )
        self.leases.clear()
        self.positions.clear()
        self.polled.clear()


def committed_offsets(group: str, topic: str, *, backend: str = "default") -> dict[int, int]:
    """The group's stored next offset per partition."""
    later = log_backend(backend)
    with connection_for(later.database).cursor() as cursor:
        cursor.execute(
            "SELECT partition, next_offset FROM later_log_consumer_offset WHERE namespace = %s "
            'AND "group" = %s AND topic = %s',
            [later.namespace, group, topic],
        )
        return dict(cursor.fetchall())


__all__ = ["Consumer", "committed_offsets", "group_owners"]
