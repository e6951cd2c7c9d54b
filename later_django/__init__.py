"""Durable background jobs for Django, kept in the project's own database."""

__version__ = "0.1.0"

__all__ = ["__version__"]
