"""A consumer-group member in a process of its own, for the kill tests of ``Consumer.consume``.

    python -m tests.log.consumer_process GROUP TOPIC

It consumes ``TOPIC`` as a member of ``GROUP`` until killed. Its handler
writes one row per record (kind ``effect:GROUP``, value ``partition:offset``)
and then sleeps briefly, so a kill lands inside the handler's transaction as
often as outside it.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    import django

    django.setup()
    from django.db import connection

    from later_django.log import Consumer

    group, topic = sys.argv[1:3]

    def apply(records) -> None:
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO tests_execution (kind, value, pid, at) VALUES (%s, %s, %s, %s)",
                [
                    (f"effect:{group}", f"{r.partition}:{r.offset}", os.getpid(), time.time())
                    for r in records
                ],
            )
        time.sleep(0.05)

    with Consumer(group, topic, session_seconds=1) as consumer:
        while True:
            if consumer.consume(apply, max_records=10) == 0:
                time.sleep(0.05)


if __name__ == "__main__":
    main()
