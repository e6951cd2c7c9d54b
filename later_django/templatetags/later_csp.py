"""``{% nonce_attr %}``: the CSP nonce attribute of a dashboard ``<script>`` or ``<link>``.

Django 6.1 has ``{% csp_nonce_attr %}``; 6.0 has only the ``csp_nonce`` context
variable and 5.2 has neither. This tag renders ``nonce="..."`` on every
version when the page has a nonce: Django's (its ``csp`` context processor) or
django-csp's (``request.csp_nonce``), and nothing otherwise.
"""

from django import template
from django.utils.html import format_html

register = template.Library()


@register.simple_tag(takes_context=True)
def nonce_attr(context: template.Context) -> str:
    """Return ``nonce="<nonce>"`` for the request's CSP nonce, or ``""`` without one."""
    nonce = context.get("csp_nonce")
    if nonce is None:
        nonce = getattr(context.get("request"), "csp_nonce", None)
    if nonce is None:
        return ""
    return format_html('nonce="{}"', nonce)
