"""What the model is sent about every tool (name, description, input schema, capability
note, category, phase, gates and order) is pinned in registry_today.json, dumped from the
registry before tools were declared through typed input models: declaring a tool another
way must not change what the model sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.agents.catalog import load_agents
from app.tools.build import build_registry
from app.tools.registry import READ, NoInput, Tool, input_schema
from app.tools.registry import tool as declare

TODAY = Path(__file__).with_name("registry_today.json")


def _flags(tool: Tool) -> dict[str, bool]:
    return {
        "needs_approval_when_tainted": tool.needs_approval_when_tainted,
        "untrusted": tool.untrusted,
        "billable": tool.billable,
        "fetches_url": tool.fetches_url,
        "needs_approval_for": tool.needs_approval_for is not None,
        "held_details": tool.held_details is not None,
        "check_response": tool.check_response is not None,
        "on_approved": tool.on_approved is not None,
    }


def _as_sent(tool: Tool) -> dict[str, Any]:
    return {
        **tool.schema_for_model(),
        "category": tool.category,
        "phase": tool.phase,
        "note": tool.note,
        "label": tool.step_label,
        "flags": _flags(tool),
    }


def _property_order(schema: dict[str, Any]) -> list[Any]:
    """Every object's property names in order, depth first (dict equality ignores it)."""
    order: list[Any] = []
    for key, sub in (schema.get("properties") or {}).items():
        order.append(key)
        order.append(_property_order(sub))
    if isinstance(schema.get("items"), dict):
        order.append(_property_order(schema["items"]))
    return order


def test_every_tool_is_sent_to_the_model_as_before():
    today = json.loads(TODAY.read_text(encoding="utf-8"))
    now = [_as_sent(tool) for tool in build_registry(load_agents()).all()]

    assert [tool["name"] for tool in now] == [tool["name"] for tool in today]
    for before, after in zip(today, now, strict=True):
        assert after == before, before["name"]
        assert _property_order(after["input_schema"]) == _property_order(before["input_schema"]), (
            before["name"]
        )


def test_an_invalid_input_names_the_tool_the_property_and_what_is_wrong():
    registry = build_registry(load_agents())
    assert registry.get("get_offer").checked_input({}).problem == (
        "Invalid input for get_offer at offer_id: Field required"
    )
    assert registry.get("set_phase").checked_input({"phase": "done"}).problem == (
        "Invalid input for set_phase at phase: Input should be 'discovery' or 'build'"
    )
    assert registry.get("get_offer").checked_input({"offer_id": 3, "extra": 1}).problem == (
        "Invalid input for get_offer at extra: Extra inputs are not permitted"
    )
    assert (
        registry.get("get_offer").checked_input([3]).problem == "Tool input must be a JSON object."
    )


def test_a_tool_is_only_declared_with_tool():
    with pytest.raises(TypeError, match=r"declare get_offer with tool\(\.\.\.\)"):
        Tool(
            name="get_offer",
            description="Read an offer.",
            input_schema={"type": "object"},
            category="read",
            handler=lambda ctx, args: "ok",
            input_model=NoInput,
        )
    declared = declare(
        name="get_offer", description="Read an offer.", category=READ, input=NoInput, handler=print
    )
    assert declared.input_model is NoInput and declared.input_schema == input_schema(NoInput)
