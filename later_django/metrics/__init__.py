"""Prometheus metrics read from the later tables at scrape time.

Needs the ``prometheus`` extra (``pip install later-django[prometheus]``).
Mount the view with ``path("metrics/", include("later_django.metrics.urls"))``.
Every figure comes from the database, so one scrape of any web process sees
every worker's work and no multi-process collector setup is needed.
"""

from django.core.exceptions import ImproperlyConfigured

try:
    import prometheus_client  # noqa: F401
except ImportError as e:
    raise ImproperlyConfigured(
        "later_django.metrics needs prometheus-client, which is not installed; "
        "install it with: pip install later-django[prometheus]"
    ) from e

from .collector import LaterCollector

__all__ = ["LaterCollector"]
