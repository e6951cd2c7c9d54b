"""The scrape endpoint: staff users by session, scrapers by ``LATER_METRICS_TOKEN``.

A request without credentials gets 401 (with ``WWW-Authenticate: Bearer``), a
wrong bearer token 401 as well, and a signed-in user who is not active staff
403. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from ..conf import later_settings
from .collector import LaterCollector

REALM = 'Bearer realm="later metrics"'


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """The response that turns the request away, or None when it may see the metrics."""
    header = request.headers.get("Authorization", "")
    scheme, _, credentials = header.partition(" ")
    if header and scheme.lower() == "bearer":
        expected = later_settings.metrics_token
        given = credentials.strip()
        if expected is not None and hmac.compare_digest(given.encode(), expected.encode()):
            return None
        return _unauthorized(f'{REALM}, error="invalid_token"', "The bearer token is not valid.")
    user = getattr(request, "user", None)  # None without AuthenticationMiddleware
    if user is not None and user.is_authenticated:
        if user.is_active and user.is_staff:
            return None
        return HttpResponse(
            "Only staff users may see the metrics.\n", status=403, content_type="text/plain"
        )
    return _unauthorized(REALM, "Sign in as a staff user or send the metrics bearer token.")


def _unauthorized(challenge: str, message: str) -> HttpResponse:
    response = HttpResponse(message + "\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = challenge
    return response


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """Every configured namespace's figures in Prometheus (or OpenMetrics) text format."""
    refused = _refusal(request)
    if refused is not None:
        return refused
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LaterCollector())
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry), content_type=content_type)
