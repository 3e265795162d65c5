"""docs/reference.md is what the code says: every route and every command, each with
what it is for."""

from app.reference import REFERENCE, render_reference


def test_the_committed_reference_is_the_generated_one(app):
    generated = render_reference(app)
    assert REFERENCE.read_text() == generated, "run `flask --app wsgi reference`"


def test_every_route_and_command_says_what_it_is_for(app):
    blank = [line for line in render_reference(app).splitlines() if line.endswith("|  |")]
    assert blank == [], "give these views a docstring (or an OpenAPI summary)"
