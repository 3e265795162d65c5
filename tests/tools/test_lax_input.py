"""Host tool inputs are read by each tool's input model in pydantic's lax mode: models
send quoted numbers and booleans ("12", "true"), and such a call must not fail and cost an
iteration. What is no number or boolean is still refused: True for an id, 1.5 for a count,
"yes" for a boolean, null for an optional property."""

from __future__ import annotations

import copy
import json

import pytest

from app.agents.catalog import load_agents
from app.tools.build import build_registry
from tests.fake_model import schema_instance

REGISTRY = build_registry(load_agents())


def _paths(schema: dict, kind: str, path: tuple = ()) -> list[tuple]:
    """Where an instance holds a `kind`: ("offer_id",), ("reference_output_ids", 0)..."""
    if schema.get("type") == kind:
        return [path]
    found = []
    for key, sub in (schema.get("properties") or {}).items():
        found += _paths(sub, kind, (*path, key))
    if isinstance(schema.get("items"), dict):
        found += _paths(schema["items"], kind, (*path, 0))
    return found


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _get(data, path):
    for key in path:
        data = data[key]
    return data


def _cases(kind: str) -> list:
    return [
        pytest.param(tool.name, path, id=f"{tool.name}:{'/'.join(map(str, path))}")
        for tool in REGISTRY.all()
        for path in _paths(tool.input_schema, kind)
    ]


INTEGER_CASES = _cases("integer")
BOOLEAN_CASES = _cases("boolean")


def _with(name: str, path: tuple, value):
    """A valid input of tool `name` (as the fake model makes one) with `value` at `path`."""
    tool = REGISTRY.get(name)
    arguments = schema_instance(tool.input_schema, hint=name)
    changed = copy.deepcopy(arguments)
    _set(changed, path, value)
    return tool, arguments, changed


def test_the_registry_has_integer_and_boolean_properties_to_check():
    assert len(INTEGER_CASES) > 25
    assert BOOLEAN_CASES


@pytest.mark.parametrize(("name", "path"), INTEGER_CASES)
def test_every_integer_property_of_every_host_tool_accepts_a_quoted_number(name, path):
    tool, arguments, quoted = _with(name, path, "to be quoted")
    number = _get(arguments, path)
    _set(quoted, path, f"{number}")

    checked = tool.checked_input(quoted)

    assert checked.problem is None, checked.problem
    assert _get(checked.arguments, path) == number and type(_get(checked.arguments, path)) is int
    assert checked.coerced == ("/".join(map(str, path)),)


@pytest.mark.parametrize(("name", "path"), INTEGER_CASES)
@pytest.mark.parametrize("value", [True, False, 1.5, "1.5", "one", None])
def test_every_integer_property_of_every_host_tool_refuses_what_is_no_integer(name, path, value):
    """Every integer is declared `Integer`: lax mode alone would take True as 1."""
    tool, _, changed = _with(name, path, value)

    problem = tool.checked_input(changed).problem

    assert problem is not None and f" at {'/'.join(map(str, path))}: " in problem


@pytest.mark.parametrize(("name", "path"), BOOLEAN_CASES)
@pytest.mark.parametrize(("value", "taken"), [("true", True), (" FALSE ", False), (True, True)])
def test_every_boolean_property_accepts_true_or_false_quoted_or_not(name, path, value, taken):
    tool, _, changed = _with(name, path, value)

    checked = tool.checked_input(changed)

    assert checked.problem is None, checked.problem
    assert _get(checked.arguments, path) is taken


@pytest.mark.parametrize(("name", "path"), BOOLEAN_CASES)
@pytest.mark.parametrize("value", ["yes", "no", "1", "0", 1, 0, None])
def test_every_boolean_property_refuses_anything_else(name, path, value):
    """Every boolean is declared `Boolean`: lax mode alone would take "yes" and 1."""
    tool, _, changed = _with(name, path, value)

    problem = tool.checked_input(changed).problem

    assert problem is not None and f" at {'/'.join(map(str, path))}: " in problem


def test_a_quoted_boolean_and_a_whole_float_are_accepted():
    ask = REGISTRY.get("ask_user")
    checked = ask.checked_input({"question": "Which?", "allow_free_text": "true"})
    assert checked.problem is None and checked.arguments["allow_free_text"] is True
    offer = REGISTRY.get("get_offer").checked_input({"offer_id": 7.0})
    assert offer.problem is None and offer.arguments == {"offer_id": 7}


@pytest.mark.parametrize("value", ["seven", "7.5", "", "0x10", True, [7]])
def test_what_is_not_a_number_is_still_refused(value):
    checked = REGISTRY.get("get_offer").checked_input({"offer_id": value})
    assert checked.problem is not None and "offer_id" in checked.problem


def test_a_string_property_keeps_its_digits_as_text():
    checked = REGISTRY.get("save_character").checked_input({"name": "1984", "description": "007"})
    assert checked.problem is None and checked.arguments == {"name": "1984", "description": "007"}
    assert checked.coerced == ()


def test_unknown_properties_are_still_refused():
    checked = REGISTRY.get("get_offer").checked_input({"offer_id": "3", "extra": "1"})
    assert checked.problem is not None and json.dumps(checked.arguments)
