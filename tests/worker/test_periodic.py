"""A worker's periodic duty that keeps failing logs its traceback once, then a line a failure."""

import logging
import threading

from later_django.worker.services import Periodic


def test_a_failing_duty_logs_one_traceback_then_one_line_per_failure(caplog):
    calls = 0
    done = threading.Event()

    def tick() -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise ConnectionError(f"database away (call {calls})")
        done.set()

    duty = Periodic("later-test-duty", lambda: 0.01, tick)
    with caplog.at_level(logging.WARNING, logger="later_django.worker.services"):
        duty.start()
        assert done.wait(10)
        duty.stop()
    records = [r for r in caplog.records if r.name == "later_django.worker.services"]
    messages = [r.getMessage() for r in records]
    assert messages[:4] == [
        "later-test-duty failed; trying again in 0.01s",
        "later-test-duty failed again (2 in a row) error=database away (call 2)",
        "later-test-duty failed again (3 in a row) error=database away (call 3)",
        "later-test-duty works again after 3 failures",
    ]
    assert [r.exc_info is not None for r in records[:4]] == [True, False, False, False]
