"""docs/deployment.md shows only commands, flags and settings that exist, and a valid unit."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from django.core.management import load_command_class

from later_django.conf import SETTINGS
from tests.conftest import ROOT

GUIDE = ROOT / "docs" / "deployment.md"
COMMAND_APPS = {
    "later_worker": "later_django",
    "later_health": "later_django",
    "migrate": "django.core",
    "collectstatic": "django.contrib.staticfiles",
}


def code_blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced block of the guide."""
    return re.findall(r"^```(\w*)\n(.*?)^```", GUIDE.read_text(), re.MULTILINE | re.DOTALL)


def invocations() -> list[list[str]]:
    """Every ``manage.py`` command line in the guide's blocks, as its arguments after manage.py."""
    found = []
    for _, body in code_blocks():
        for line in body.splitlines():
            exec_form = re.search(r'\[[^\[\]]*"manage\.py"[^\[\]]*\]', line)
            if exec_form:
                args = json.loads(exec_form.group(0))
                found.append(args[args.index("manage.py") + 1 :])
            elif "manage.py " in line:
                found.append(shlex.split(line.split("manage.py ", 1)[1], comments=True))
    return found


def test_every_manage_py_command_in_the_guide_parses_with_the_real_command():
    found = invocations()
    assert {args[0] for args in found} == set(COMMAND_APPS)
    for command, *argv in found:
        # The guide's database aliases are a project's; this one has only default.
        previous = ["", *argv][: len(argv)]
        argv = [
            "default" if flag == "--database" else arg
            for flag, arg in zip(previous, argv, strict=True)
        ]
        parser = load_command_class(COMMAND_APPS[command], command).create_parser(
            "manage.py", command
        )
        parser.parse_args(argv)  # CommandError names a flag or value that does not exist


def test_every_later_setting_the_guide_names_exists():
    named = set(re.findall(r"\bLATER_[A-Z_]+\b", GUIDE.read_text()))
    assert named
    assert named - set(SETTINGS) == set()


def test_the_guide_names_the_router_by_its_real_path():
    from django.utils.module_loading import import_string

    paths = set(re.findall(r"later_django\.routers\.\w+", GUIDE.read_text()))
    assert paths == {"later_django.routers.LaterRouter"}
    for path in paths:
        import_string(path)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_systemd_unit_of_the_guide_verifies(tmp_path):
    [unit] = [body for lang, body in code_blocks() if lang == "ini" and "[Service]" in body]
    # verify wants ExecStart's program to exist: the guide's is a project's venv.
    program = re.search(r"^ExecStart=(\S+)", unit, re.MULTILINE)
    assert program is not None
    (tmp_path / "later-worker@.service").write_text(unit.replace(program.group(1), sys.executable))
    done = subprocess.run(
        ["systemd-analyze", "verify", "./later-worker@1.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Unknown keys and bad values are only printed, with exit status 0.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_guide_is_linked_from_the_readme_and_the_worker_and_operations_pages():
    for page in ("README.md", "docs/worker.md", "docs/operations.md"):
        assert "deployment.md" in (ROOT / page).read_text(), page
