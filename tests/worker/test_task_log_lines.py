"""Django's per-task log lines in the worker: skipped only where nothing would show them."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import django
import pytest
from django.test import override_settings

from later_django.management.commands.later_worker import shown, unseen_task_lines_skipped
from later_django.tasks_api import TASKS_LOGGER

# Django's default LOGGING sets INFO on "django", and Django 6's task logger sits under
# it. The Django 5.2 backport logs on "django_tasks", outside it, at the root's WARNING:
# its INFO lines are off already, and the worker leaves that logger alone.
under_djangos_logging = pytest.mark.skipif(
    django.VERSION < (6, 0), reason="the backport's task logger is not under Django's LOGGING"
)


@contextlib.contextmanager
def project_logging() -> Iterator[logging.Logger]:
    """The suite's LOGGING as a project has it: Django's defaults (``django`` to a console
    handler shown only with DEBUG, and to ``mail_admins`` at ERROR), nothing on the root.
    The capture handlers pytest puts on the root while a test runs are set aside."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    try:
        yield logging.getLogger(TASKS_LOGGER)
    finally:
        root.handlers[:] = saved


@under_djangos_logging
def test_djangos_default_logging_shows_no_task_lines_without_debug():
    with project_logging() as log:
        assert log.isEnabledFor(logging.INFO)  # the records would be built...
        assert not shown(log, logging.INFO)  # ...and dropped by every handler
        assert shown(log, logging.ERROR)  # mail_admins takes failures


@under_djangos_logging
@override_settings(DEBUG=True)
def test_with_debug_on_djangos_console_handler_shows_them():
    with project_logging() as log:
        assert shown(log, logging.INFO)


@under_djangos_logging
def test_a_handler_anywhere_up_the_way_shows_them():
    with project_logging() as log:
        handler = logging.NullHandler()
        logging.getLogger().addHandler(handler)
        try:
            assert shown(log, logging.INFO)
        finally:
            logging.getLogger().removeHandler(handler)


def test_a_level_the_project_set_or_a_hook_on_every_record_counts_as_shown(monkeypatch):
    with project_logging() as log:
        log.setLevel(logging.INFO)
        try:
            assert shown(log, logging.INFO)
        finally:
            log.setLevel(logging.NOTSET)
        original = logging.Logger.callHandlers

        def breadcrumbs(self, record):  # what an error tracker's integration does
            return original(self, record)

        monkeypatch.setattr(logging.Logger, "callHandlers", breadcrumbs)
        assert shown(log, logging.INFO)


@under_djangos_logging
def test_the_worker_raises_the_level_while_it_runs_and_restores_it():
    with project_logging() as log:
        with unseen_task_lines_skipped():
            assert log.level == logging.WARNING
            assert log.isEnabledFor(logging.ERROR)
        assert log.level == logging.NOTSET
        assert log.isEnabledFor(logging.INFO)


@under_djangos_logging
@override_settings(DEBUG=True)
def test_the_worker_leaves_the_level_alone_where_the_lines_show():
    with project_logging() as log, unseen_task_lines_skipped():
        assert log.level == logging.NOTSET


def test_the_worker_leaves_alone_a_logger_whose_info_lines_are_off_already():
    with project_logging() as log:
        parent = logging.getLogger("django")
        saved = parent.level
        parent.setLevel(logging.WARNING)  # as the root's level holds the backport's logger
        try:
            with unseen_task_lines_skipped():
                assert log.level == logging.NOTSET
                assert not log.isEnabledFor(logging.INFO)
        finally:
            parent.setLevel(saved)
