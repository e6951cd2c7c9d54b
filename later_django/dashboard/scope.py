"""Which namespace (and database) a dashboard request looks at."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import Http404, HttpRequest

from ..options import configured_namespaces, later_aliases

DEFAULT_NAMESPACE = "default"
DEFAULT_DATABASE = "default"


@dataclass(frozen=True)
class Scope:
    """One namespace on one database alias, plus the others the switch offers."""

    namespace: str
    database: str
    choices: tuple[str, ...]

    @property
    def query(self) -> dict[str, str]:
        """The query parameters that keep this namespace selected across links."""
        if len(self.choices) > 1 and self.namespace != self.choices[0]:
            return {"namespace": self.namespace}
        return {}


def _databases() -> dict[str, str]:
    """Map each configured namespace to the database alias its backend uses."""
    found: dict[str, str] = {}
    for _, options in later_aliases():
        namespace = options.get("namespace", DEFAULT_NAMESPACE)
        found.setdefault(namespace, options.get("database", DEFAULT_DATABASE))
    return found


def configured_scopes() -> list[Scope]:
    """One scope per namespace a Later backend alias uses (the default one when none does)."""
    choices = tuple(configured_namespaces()) or (DEFAULT_NAMESPACE,)
    databases = _databases()
    return [Scope(ns, databases.get(ns, DEFAULT_DATABASE), choices) for ns in choices]


def resolve(request: HttpRequest) -> Scope:
    """Pick the namespace named by ``?namespace=`` or the first configured one.

    Raises Http404 for a namespace that no Later backend alias uses.
    """
    choices = tuple(configured_namespaces()) or (DEFAULT_NAMESPACE,)
    wanted = request.GET.get("namespace") or choices[0]
    if wanted not in choices:
        raise Http404(
            f"Namespace {wanted!r} is not configured; the Later backends use "
            f"{', '.join(map(repr, choices))}."
        )
    database = _databases().get(wanted, DEFAULT_DATABASE)
    return Scope(namespace=wanted, database=database, choices=choices)
