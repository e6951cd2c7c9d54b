"""Recurring schedules: cron strings, their definitions and storage, and firing them."""

# The reserved topic whose partitions, keyed by schedule identifier, keep the
# occurrences of a sequential schedule (and their continuations) in order.
SCHEDULES_TOPIC = "later.schedules"
