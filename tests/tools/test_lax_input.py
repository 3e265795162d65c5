"""Host tool inputs are checked in lax mode first, the way pydantic's lax mode does it:
models send quoted numbers and booleans ("12", "true"), and such a call must not fail and
cost an iteration. Everything else is still checked strictly."""

from __future__ import annotations

import copy
import json

import pytest

from app.agents.catalog import load_agents
from app.tools.build import build_registry
from tests.fake_model import schema_instance

REGISTRY = build_registry(load_agents())


def _integer_paths(schema: dict, path: tuple = ()) -> list[tuple]:
    """Where an instance holds an integer: ("offer_id",), ("reference_output_ids", 0)..."""
    if schema.get("type") == "integer":
        return [path]
    found = []
    for key, sub in (schema.get("properties") or {}).items():
        found += _integer_paths(sub, (*path, key))
    if isinstance(schema.get("items"), dict):
        found += _integer_paths(schema["items"], (*path, 0))
    return found


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _get(data, path):
    for key in path:
        data = data[key]
    return data


INTEGER_CASES = [
    pytest.param(tool.name, path, id=f"{tool.name}:{'/'.join(map(str, path))}")
    for tool in REGISTRY.all()
    for path in _integer_paths(tool.input_schema)
]


def test_the_registry_has_integer_properties_to_check():
    assert len(INTEGER_CASES) > 25


@pytest.mark.parametrize(("name", "path"), INTEGER_CASES)
def test_every_integer_property_of_every_host_tool_accepts_a_quoted_number(name, path):
    tool = REGISTRY.get(name)
    arguments = schema_instance(tool.input_schema, hint=name)
    number = _get(arguments, path)
    quoted = copy.deepcopy(arguments)
    _set(quoted, path, f"{number}")
    assert tool.validation_error(quoted) is not None, "the strict check alone refuses it"

    checked = tool.checked_input(quoted)

    assert checked.problem is None, checked.problem
    assert _get(checked.arguments, path) == number and type(_get(checked.arguments, path)) is int
    assert checked.coerced == ("/".join(map(str, path)),)


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
