"""Who may scrape: staff by session, scrapers by LATER_METRICS_TOKEN; everyone else is refused."""

import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from tests.conftest import ROOT, worker_env

from .conftest import TOKEN, URL, parse, value

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@override_settings(LATER_METRICS_TOKEN=TOKEN)
def test_the_configured_bearer_token_opens_the_metrics():
    response = Client().get(URL, headers=bearer(TOKEN))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "no-cache" in response["Cache-Control"]
    assert value(parse(response.content.decode()), "later_jobs", stage="enqueued") == 0


def test_a_staff_user_signed_in_sees_the_metrics():
    client = Client()
    client.force_login(User.objects.create_user("ops", password="pw", is_staff=True))
    response = client.get(URL)
    assert response.status_code == 200
    assert value(parse(response.content.decode()), "later_workers_alive") == 0


def test_openmetrics_is_served_to_a_scraper_that_asks_for_it():
    client = Client()
    client.force_login(User.objects.create_user("ops", password="pw", is_staff=True))
    response = client.get(URL, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().endswith("# EOF\n")


@override_settings(LATER_METRICS_TOKEN=TOKEN)
def test_a_request_without_credentials_is_401_with_a_bearer_challenge():
    response = Client().get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="later metrics"'
    assert b"later_jobs" not in response.content


@override_settings(LATER_METRICS_TOKEN=TOKEN)
@pytest.mark.parametrize("token", [TOKEN + "x", TOKEN[:-1], "", TOKEN.upper()])
def test_a_wrong_bearer_token_is_401_invalid_token(token):
    response = Client().get(URL, headers=bearer(token))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="later metrics", error="invalid_token"'
    assert b"later_jobs" not in response.content


@override_settings(LATER_METRICS_TOKEN=None)
def test_no_token_is_accepted_while_none_is_configured():
    for token in ("None", "", "null"):
        assert Client().get(URL, headers=bearer(token)).status_code == 401


@override_settings(LATER_METRICS_TOKEN="")
def test_an_empty_configured_token_lets_no_scraper_in():
    # Check later.E001 reports the setting; the view must not open meanwhile.
    assert Client().get(URL, headers={"Authorization": "Bearer "}).status_code == 401


def test_a_signed_in_user_who_is_not_staff_is_403():
    client = Client()
    client.force_login(User.objects.create_user("someone", password="pw"))
    response = client.get(URL)
    assert response.status_code == 403
    assert response.content == b"Only staff users may see the metrics.\n"


def test_an_inactive_staff_user_is_refused():
    client = Client()
    user = User.objects.create_user("gone", password="pw", is_staff=True)
    client.force_login(user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert client.get(URL).status_code == 401  # the session no longer signs anyone in


@override_settings(LATER_METRICS_TOKEN=TOKEN)
def test_only_get_and_head_are_served():
    assert Client().post(URL, headers=bearer(TOKEN)).status_code == 405
    assert Client().head(URL, headers=bearer(TOKEN)).status_code == 200


def test_importing_the_metrics_without_prometheus_client_names_the_extra():
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "import django; django.setup()\n"
        "from django.core.exceptions import ImproperlyConfigured\n"
        "try:\n"
        "    import later_django.metrics\n"
        "except ImproperlyConfigured as e:\n"
        "    print(e)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout == (
        "later_django.metrics needs prometheus-client, which is not installed; "
        "install it with: pip install later-django[prometheus]\n"
    ), completed.stderr
