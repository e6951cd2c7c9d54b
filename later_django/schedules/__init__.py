"""Recurring schedules: cron strings, their definitions and storage, and firing them."""

from ..topics import SCHEDULES_TOPIC

__all__ = ["SCHEDULES_TOPIC"]
