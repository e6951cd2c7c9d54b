"""One module, ``later_django.tasks_api``, brings Django's Tasks API on every Django version."""

import inspect
import re

import django
import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from later_django import tasks_api
from tests.conftest import ROOT

# An import of django.tasks or the backport, in any of Python's spellings.
DIRECT = re.compile(r"^\s*(from|import)\s+(django\.tasks|django_tasks)\b", re.MULTILINE)


# The shim itself; and the upgrade project, which must also run with release 0.1.0
# (before the shim existed) and so runs on Django 6 only.
ALLOWED = [ROOT / "later_django" / "tasks_api.py", ROOT / "tests" / "upgrade"]


def test_no_module_but_the_shim_imports_the_tasks_api_directly():
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("later_django", "tests", "example_project", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if not any(path == allowed or allowed in path.parents for allowed in ALLOWED)
        and DIRECT.search(path.read_text())
    ]
    assert offenders == []


def test_the_shim_takes_the_api_from_django_from_6_0_and_from_the_backport_before():
    expected = ("django.tasks", "django.utils.json") if django.VERSION >= (6, 0) else "django_tasks"
    for name in tasks_api.__all__:
        value = getattr(tasks_api, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith(expected), (name, value.__module__)


def test_the_exceptions_keep_django_s_names_and_bases():
    assert issubclass(tasks_api.InvalidTask, Exception)
    assert issubclass(tasks_api.InvalidTaskBackend, ImproperlyConfigured)
    assert issubclass(tasks_api.TaskResultDoesNotExist, Exception)


@pytest.mark.django_db
@override_settings(
    TASKS={
        "default": {
            "BACKEND": "later_django.backend.LaterBackend",
            "OPTIONS": {"namespace": "no spaces"},
        }
    }
)
def test_the_system_checks_of_task_backends_run_without_the_backport_in_installed_apps():
    ids = [message.id for message in checks.run_checks()]
    assert "later.E002" in ids


def result_fields(**changes):
    from tests import tasks

    fields = dict(
        task=tasks.add,
        id="01jd0000000000000000000000",
        status=tasks_api.TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=[1, [2, 3], {"a": None}],
        kwargs={"k": "v"},
        backend="default",
        errors=[],
        worker_ids=[],
    )
    return fields | changes


@pytest.mark.parametrize("fast", [True, False], ids=["field by field", "by the constructor"])
def test_new_result_makes_the_result_django_s_constructor_makes(fast, monkeypatch):
    if not fast:  # a TaskResult whose fields new_result does not know
        monkeypatch.setattr(tasks_api, "_SETTERS", None)
    made = tasks_api.new_result(**result_fields())
    assert type(made) is tasks_api.TaskResult
    assert made == tasks_api.TaskResult(**result_fields())
    with pytest.raises(AttributeError):  # as frozen as any other
        made.id = "another"  # type: ignore[misc]


def test_new_result_fills_the_fields_without_normalising_again():
    # Django 6 and the backport have the fields new_result knows. A version whose
    # TaskResult has other fields gets the constructor; this test is what says so.
    assert tasks_api._SETTERS is not None, "TaskResult's fields changed: new_result is slow"
    args = [1, 2]
    assert tasks_api.new_result(**result_fields(args=args)).args is args
