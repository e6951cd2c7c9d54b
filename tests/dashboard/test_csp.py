"""The dashboard's script and stylesheet carry the page's CSP nonce on every Django version."""

import re
from importlib.util import find_spec
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.template import Context, Template
from django.test import override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db

URL = reverse("admin:later_dashboard_changelist")
TAGS = Template("{% load later_csp %}<script {% nonce_attr %}></script>")


def test_the_tag_renders_django_s_nonce_from_the_context():
    assert TAGS.render(Context({"csp_nonce": "n0nce"})) == '<script nonce="n0nce"></script>'


def test_the_tag_renders_the_nonce_django_csp_puts_on_the_request():
    request = SimpleNamespace(csp_nonce="fr0m-request")
    rendered = TAGS.render(Context({"request": request}))
    assert rendered == '<script nonce="fr0m-request"></script>'


def test_the_tag_renders_nothing_without_a_nonce():
    assert TAGS.render(Context({"request": SimpleNamespace()})) == "<script ></script>"


def test_the_tag_escapes_the_nonce():
    rendered = TAGS.render(Context({"csp_nonce": '"><b>'}))
    assert rendered == '<script nonce="&quot;&gt;&lt;b&gt;"></script>'


def test_without_csp_the_dashboard_has_no_nonce_attribute(viewer_client):
    html = viewer_client.get(URL).content.decode()
    assert "later/dashboard.js" in html
    assert "later/dashboard.css" in html
    assert "nonce=" not in html


@pytest.mark.skipif(
    find_spec("django.middleware.csp") is None, reason="Django before 6.0 has no CSP middleware"
)
def test_with_django_s_csp_the_script_and_stylesheet_carry_the_header_s_nonce(viewer_client):
    from django.utils.csp import CSP

    templates = [{**settings.TEMPLATES[0]}]
    templates[0]["OPTIONS"] = {
        **templates[0]["OPTIONS"],
        "context_processors": [
            *templates[0]["OPTIONS"]["context_processors"],
            "django.template.context_processors.csp",
        ],
    }
    with override_settings(
        MIDDLEWARE=[*settings.MIDDLEWARE, "django.middleware.csp.ContentSecurityPolicyMiddleware"],
        SECURE_CSP={"script-src": [CSP.SELF, CSP.NONCE], "style-src": [CSP.SELF, CSP.NONCE]},
        TEMPLATES=templates,
    ):
        response = viewer_client.get(URL)
    header = response.headers["Content-Security-Policy"]
    [nonce] = set(re.findall(r"'nonce-([^']+)'", header))
    html = response.content.decode()
    assert re.search(rf'<script src="[^"]*later/dashboard\.js" defer nonce="{nonce}">', html)
    assert re.search(
        rf'<link rel="stylesheet" href="[^"]*later/dashboard\.css" nonce="{nonce}">', html
    )
