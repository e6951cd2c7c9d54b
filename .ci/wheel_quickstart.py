"""Build the wheel, install it into a fresh venv, and run docs/quickstart.md against it.

The checkout is never importable there: the venv is new, the wheel is
installed without ``-e``, the project is written into a temporary directory
and every command runs from it with ``PYTHONPATH`` unset. So the quick start
fails here if the wheel misses a module, a migration, a template, a static
file or a dependency that it needs.

Usage: python .ci/wheel_quickstart.py [--extras EXTRAS] [pip requirement ...]
e.g. --extras django52 "django>=5.2,<6.0" for Django 5.2 with the backport.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_SOURCES = shutil.ignore_patterns(
    ".*", "__pycache__", "build", "dist", "*.egg-info", "*.sqlite3*", "node_modules"
)

SETTINGS = """
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "quick-start"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "later_django",
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "mysite.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
    }
}
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "static"
TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"namespace": "shop"},
    }
}
"""

URLS = """
from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
"""

TASKS = """
import later_django


@later_django.task
def resize_image(photo_id: int, width: int) -> str:
    return f"photo {photo_id} at {width}px"


@later_django.task(queue_name="emails", max_attempts=5, backoff="exponential_jitter", timeout=30)
def send_receipt(order_id: int) -> str:
    return f"receipt for order {order_id}"
"""

# Run as `python steps.py enqueue|verify` from the project directory.
STEPS = """
import os
import sys
from pathlib import Path

import django

os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
django.setup()

from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.db import transaction
from django.test import Client

import later_django
from shop.tasks import resize_image, send_receipt

IDS = Path("job-ids.txt")


def enqueue():
    with transaction.atomic():
        receipt = send_receipt.enqueue(7)
    resized = resize_image.enqueue_many([((p, 640), {}) for p in (1, 2)])
    IDS.write_text("\\n".join([receipt.id, *(r.id for r in resized)]))


def verify():
    package = Path(later_django.__file__).resolve()
    assert Path(sys.prefix).resolve() in package.parents, f"later_django comes from {package}"
    receipt, *resized = IDS.read_text().split()
    result = send_receipt.get_result(receipt)
    assert result.status == "SUCCESSFUL", (result.status, result.errors)
    assert result.return_value == "receipt for order 7", result.return_value
    assert [resize_image.get_result(i).return_value for i in resized] == [
        "photo 1 at 640px",
        "photo 2 at 640px",
    ]
    for static in ("later/dashboard.js", "later/dashboard.css"):
        assert finders.find(static), f"{static} is not in the installed package"
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "admin@example.com", "pw"))
    page = client.get("/admin/later/dashboard/")
    assert page.status_code == 200, page.status_code
    assert b"later/dashboard.js" in page.content
    print(
        f"quick start passed: later_django {later_django.__version__} from {package.parent}, "
        f"Django {django.get_version()}"
    )


{"enqueue": enqueue, "verify": verify}[sys.argv[1]]()
"""


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> None:
    print("$", " ".join(str(part) for part in command), flush=True)
    subprocess.run([str(part) for part in command], cwd=cwd, env=env, check=True)


def build_wheel(work: Path) -> Path:
    """Build the wheel from a copy of the checkout, so the build leaves nothing in it."""
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--disable-pip-version-check", "--wheel-dir", work / "dist", source, cwd=work,
    )  # fmt: skip
    [wheel] = (work / "dist").glob("*.whl")
    return wheel


def write_project(project: Path) -> None:
    files = {
        "mysite/__init__.py": "",
        "mysite/settings.py": SETTINGS,
        "mysite/urls.py": URLS,
        "shop/__init__.py": "",
        "shop/tasks.py": TASKS,
        "steps.py": STEPS,
    }
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(textwrap.dedent(text).lstrip())


def main(extras: str | None, requirements: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="later-wheel-") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work)
        venv = work / "venv"
        run(sys.executable, "-m", "venv", venv, cwd=work)
        python = venv / "bin" / "python"
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        run(*pip, f"{wheel}[{extras}]" if extras else wheel, *requirements, cwd=work)
        project = work / "project"
        write_project(project)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
        django = [python, "-m", "django"]
        run(*django, "check", "--fail-level", "WARNING", cwd=project, env=env)
        run(*django, "migrate", "--verbosity", "0", cwd=project, env=env)
        run(python, "steps.py", "enqueue", cwd=project, env=env)
        run(*django, "later_worker", "--burst", cwd=project, env=env)
        run(python, "steps.py", "verify", cwd=project, env=env)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", help="extras of the wheel to install, e.g. django52")
    parser.add_argument("requirements", nargs="*", help="more pip requirements")
    arguments = parser.parse_args()
    try:
        main(arguments.extras, arguments.requirements)
    except subprocess.CalledProcessError as e:
        sys.exit(f"error: the installed wheel's quick start failed at: {' '.join(e.cmd)}")
