"""The exceptions later_django raises; every one derives from LaterError."""

from django.db.transaction import TransactionManagementError


class LaterError(Exception):
    """Base class of every error later_django raises on purpose."""


class InvalidArgument(LaterError, ValueError):
    """A value given to later_django is not one it accepts."""


class SerializationError(InvalidArgument, TypeError):
    """Task arguments or a return value cannot be stored.

    A TypeError as well, as Django's own backends raise for values JSON cannot
    carry, so code written for them catches it.
    """


class InvalidCall(InvalidArgument, TypeError):
    """A call given to ``enqueue_many`` is not an (args, kwargs) pair of the accepted types."""


class TaskUnavailable(LaterError):
    """A job's task path does not lead to the Task defined there, so the job cannot run."""


class PayloadDecodeError(LaterError):
    """Stored bytes could not be decoded into a job record."""


class UnknownTopic(InvalidArgument):
    """A topic name is not declared in the backend's OPTIONS."""


class TopicLayoutMismatch(LaterError):
    """A topic's configured partition count differs from the stored one."""


class LeaseLost(LaterError):
    """A lease (job execution, partition or consumer group) is no longer held."""


class JobNotFound(LaterError, LookupError):
    """No job exists with the given id in this namespace."""


class InvalidTransition(LaterError):
    """A job is not in a stage that allows the requested change."""


class ScheduleNotFound(LaterError, LookupError):
    """No schedule exists with the given identifier in this namespace."""


class ScheduleBusy(LaterError):
    """A sequential schedule was asked to run while its last occurrence is unfinished."""


class UndecodableJob(InvalidTransition, PayloadDecodeError):
    """A job whose stored record cannot be decoded was asked to do what needs the record."""


class TaskTimeout(LaterError):
    """A task ran longer than its timeout."""


class InterruptedByTimeout(TaskTimeout):
    """Raised inside a task's thread when the worker interrupts it at its timeout."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or ("The task ran longer than its timeout and was interrupted.",)))


class InterruptedByCancel(LaterError):
    """Raised inside a task's thread when its job was cancelled and it ran past the grace."""

    def __init__(self, *args: object) -> None:
        super().__init__(
            *(
                args
                or (
                    "The job was cancelled and did not stop within LATER_CANCEL_GRACE, "
                    "so it was interrupted.",
                )
            )
        )


class AutocommitRequired(LaterError, TransactionManagementError):
    """A statement that cannot run inside a transaction was called inside an atomic block."""
