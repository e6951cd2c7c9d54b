"""Django's Tasks tests that have no counterpart here, each with the reason.

Every other test in Django's ``tests/tasks/`` is mirrored by a test of this
package whose comment names it.
"""

import pytest

NEWER_DJANGO = "needs {what}, which no supported Django (up to 6.1) has"
CUSTOM = "exercises a backend class defined in Django's test module, not LaterBackend"
HELPER = "exercises one of Django's internal helper functions; no backend code runs"
PROTOTYPE = "exercises an early prototype's API (django.tasks.registry) that never shipped"
METADATA = NEWER_DJANGO.format(what="task metadata (Task.metadata, TaskResult.metadata)")
ORDERING = NEWER_DJANGO.format(what="TaskResult ordering and hashing (__lt__, __hash__)")

NOT_APPLICABLE = [
    (
        "test_immediate_backend.py::test_cannot_get_result",
        "LaterBackend supports get_result (supports_get_result is True); see "
        "test_enqueue.py::test_get_result_and_aget_result_equal_the_enqueued_result",
    ),
    (
        "test_immediate_backend.py::test_cannot_refresh_result",
        "LaterBackend supports refresh; see "
        "test_execution.py::test_refresh_and_arefresh_read_what_the_worker_stored",
    ),
    (
        "test_immediate_backend.py::test_cannot_pass_run_after",
        "LaterBackend supports run_after (supports_defer is True); see "
        "test_execution.py::test_run_after_in_the_past_runs_and_in_the_future_waits",
    ),
    (
        "test_dummy_backend.py::test_validate_disallowed_async_task",
        "LaterBackend supports async tasks; test_execution.py runs one in the worker",
    ),
    ("test_dummy_backend.py::test_clear", "clear() is an API of DummyBackend only"),
    ("test_custom_backend.py::test_using_correct_backend", CUSTOM),
    ("test_custom_backend.py::test_enqueue_async_task_on_non_async_backend", CUSTOM),
    (
        "test_custom_backend.py::test_backend_does_not_support_priority",
        CUSTOM + "; LaterBackend supports priority (test_validation.py checks its bounds)",
    ),
    ("test_custom_backend.py::test_options", CUSTOM),
    ("test_custom_backend.py::test_no_enqueue", CUSTOM),
    ("test_tasks.py::test_task_result_comparability_in_priority_queue", ORDERING),
    ("test_tasks.py::test_task_result_equality", ORDERING),
    ("test_tasks.py::test_task_result_equality_not_implemented", ORDERING),
    ("test_tasks.py::test_task_result_hash_equal_objects", ORDERING),
    ("test_tasks.py::test_task_result_hash_usable_in_set", ORDERING),
    ("test_tasks.py::test_task_result_hash_usable_as_dict_key", ORDERING),
    ("test_tasks.py::test_task_result_lt_not_implemented", ORDERING),
    ("test_tasks.py::test_task_result_lt_stability", ORDERING),
    *(
        (f"test_metadata.py::{name}", METADATA)
        for name in (
            "test_using_metadata",
            "test_task_with_metadata_is_hashable",
            "test_task_with_metadata_is_picklable",
            "test_invalid_metadata",
            "test_backend_without_metadata_support",
            "test_enqueue_with_metadata",
            "test_reserved_keys_are_hidden",
            "test_result_metadata_is_a_copy",
            "test_modified_metadata_saved_on_success",
            "test_modified_metadata_saved_on_success_async",
            "test_modified_metadata_saved_on_failure",
            "test_modified_nested_metadata_saved",
            "test_unmodified_metadata_not_saved",
            "test_invalid_modified_metadata_fails_task",
            "test_save_metadata",
            "test_asave_metadata",
            "test_save_preserves_reserved_keys",
            "test_dummy_backend_save_metadata",
            "test_dummy_backend_asave_metadata",
            "test_refresh_metadata",
            "test_asave_metadata_falls_back_to_sync",
            "test_save_metadata_falls_back_to_async",
            "test_save_metadata_not_implemented",
            "test_default_backend_supports_metadata",
        )
    ),
    *(
        (f"test_utils.py::{name}", HELPER)
        for name in (
            "IsModuleLevelFunctionTestCase::test_builtin",
            "IsModuleLevelFunctionTestCase::test_from_module",
            "IsModuleLevelFunctionTestCase::test_private_function",
            "IsModuleLevelFunctionTestCase::test_coroutine",
            "IsModuleLevelFunctionTestCase::test_method",
            "IsModuleLevelFunctionTestCase::test_lambda",
            "IsModuleLevelFunctionTestCase::test_uninitialised_method",
            "JSONNormalizeTestCase::test_round_trip",
            "JSONNormalizeTestCase::test_encode_error",
            "RetryTestCase::test_retry",
            "RetryTestCase::test_skip_retry_on_keyboard_interrupt",
            "RetryTestCase::test_keeps_return_value",
            "ExceptionTracebackTestCase::test_literal_exception",
            "ExceptionTracebackTestCase::test_exception",
            "ExceptionTracebackTestCase::test_complex_exception",
        )
    ),
    *(
        (f"tests.py::TestTaskDecorator::{name}", PROTOTYPE)
        for name in (
            "test_decorator_works_without_arguments",
            "test_decorator_works_on_its_own",
            "test_decortor_can_accept_name",
            "test_decorator_works_with_callables",
        )
    ),
]


@pytest.mark.parametrize(
    ("django_test", "reason"), NOT_APPLICABLE, ids=[name for name, _ in NOT_APPLICABLE]
)
def test_django_test_that_does_not_apply(django_test, reason):
    pytest.skip(f"Django: tests/tasks/{django_test}: {reason}")
