"""Scraping the metrics view and reading its samples back with Prometheus' own parser."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "scrape-t0ken"
URL = "/metrics/"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(body: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` with exactly these labels (namespace defaults to tests)."""
    labels.setdefault("namespace", "tests")
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def scrape() -> object:
    """Scrape the view with the bearer token; return the parsed samples."""

    def scrape_once() -> Samples:
        with override_settings(LATER_METRICS_TOKEN=TOKEN):
            response = Client().get(URL, headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200, response.content
        return parse(response.content.decode())

    return scrape_once
