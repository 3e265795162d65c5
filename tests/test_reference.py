"""docs/reference.md is what the code says: every setting, route and command, each with
what it is for."""

import re

from app.reference import REFERENCE, render_reference


def test_the_committed_reference_is_the_generated_one(app):
    generated = render_reference(app)
    assert REFERENCE.read_text() == generated, "run `flask --app wsgi reference`"


def test_every_route_and_command_says_what_it_is_for(app):
    blank = [line for line in render_reference(app).splitlines() if line.endswith("|  |")]
    assert blank == [], "give these views a docstring (or an OpenAPI summary)"


class RecordingEnvironment(dict):
    """An empty environment that notes every variable asked for."""

    def __init__(self):
        super().__init__()
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_every_setting_the_code_reads_is_documented(tmp_path):
    from app.config import PROJECT_ROOT, load_settings
    from app.reference import DOCUMENTED_SETTINGS

    environment = RecordingEnvironment()
    load_settings({"instance_path": tmp_path}, env=environment)
    gunicorn = re.findall(
        r"os\.environ\.get\([\"'](\w+)", (PROJECT_ROOT / "gunicorn.conf.py").read_text()
    )
    documented = {setting.env for setting in DOCUMENTED_SETTINGS}
    assert environment.read and gunicorn
    assert (environment.read | set(gunicorn)) - documented == set()
    assert documented - (environment.read | set(gunicorn)) == set(), "documented but never read"
