"""A tool's input through the loop's path (`Workspace.call`: the input model's lax check,
then `invoke`): quoted numbers and booleans are taken as such, at any depth, and the
handler gets them typed; what is no number or boolean is the model's `is_error` result."""

from __future__ import annotations

import pytest

from app.tools.registry import READ, Boolean, Integer, Number, ToolInput, tool
from app.tools.results import Pause, ToolResult
from tests.tools import make_workspace


@pytest.fixture
def ws(app):
    workspace = make_workspace(app)
    workspace.services.tools.add(SKETCH)
    yield workspace
    workspace.session.close()


class Size(ToolInput):
    width: Integer
    ratio: Number | None = None
    framed: Boolean | None = None


class SketchInput(ToolInput):
    scale: Number
    sizes: list[Size]
    ids: list[Integer] | None = None


def _sketch(ctx, args: SketchInput) -> ToolResult:
    """What the handler got, with its Python types."""
    sizes = [size.model_dump(exclude_unset=True) for size in args.sizes]
    types = [type(args.scale).__name__, *(type(size.width).__name__ for size in args.sizes)]
    return ToolResult({"scale": args.scale, "sizes": sizes, "ids": args.ids, "types": types})


SKETCH = tool(
    name="sketch", description="Sketch sizes.", category=READ, input=SketchInput, handler=_sketch
)
QUOTED = {
    "scale": "1.5",
    "sizes": [{"width": "640", "ratio": "0.75", "framed": "TRUE"}, {"width": 320.0}],
    "ids": ["3", 4],
}


def test_quoted_numbers_and_booleans_are_taken_as_such_at_any_depth(ws):
    result = ws.call("sketch", QUOTED)

    assert result.content == {
        "scale": 1.5,
        "sizes": [{"width": 640, "ratio": 0.75, "framed": True}, {"width": 320}],
        "ids": [3, 4],
        "types": ["float", "int", "int"],
    }
    checked = ws.services.tools.get("sketch").checked_input(QUOTED)
    assert checked.arguments == {
        "scale": 1.5,
        "sizes": [{"width": 640, "ratio": 0.75, "framed": True}, {"width": 320}],
        "ids": [3, 4],
    }
    assert checked.coerced == ("scale", "sizes/0/width", "sizes/0/ratio", "sizes/0/framed", "ids/0")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("scale",), True),
        (("scale",), "nan"),
        (("scale",), "1,5"),
        (("sizes", 1, "width"), 1.5),
        (("sizes", 1, "width"), "1.5"),
        (("sizes", 1, "width"), True),
        (("sizes", 0, "ratio"), False),
        (("sizes", 0, "framed"), "yes"),
        (("sizes", 0, "framed"), "1"),
        (("sizes", 0, "framed"), 1),
        (("sizes", 0, "ratio"), None),
        (("ids", 1), True),
    ],
)
def test_what_is_no_number_or_boolean_is_an_error_for_the_model(ws, path, value):
    arguments = {
        "scale": "1.5",
        "sizes": [{"width": "640", "ratio": "0.75", "framed": "true"}, {"width": 320}],
        "ids": ["3", 4],
    }
    *parents, last = path
    where = arguments
    for key in parents:
        where = where[key]
    where[last] = value

    result = ws.outcome("sketch", arguments)

    assert isinstance(result, ToolResult) and result.is_error
    assert result.content.startswith(f"Invalid input for sketch at {'/'.join(map(str, path))}: ")


def test_a_quoted_id_reads_the_offer_and_true_or_a_fraction_is_refused(ws):
    offer_id = ws.ids["offer"]
    assert ws.call("get_offer", {"offer_id": f"{offer_id}"}).content["name"] == "Ada Coaching"

    for value, told in [
        (True, "Input should be a number, not a boolean"),
        (1.5, "Input should be a valid integer, got a number with a fractional part"),
        ("seven", "Input should be a valid integer, unable to parse string as an integer"),
    ]:
        result = ws.outcome("get_offer", {"offer_id": value})
        assert result.is_error
        assert result.content == f"Invalid input for get_offer at offer_id: {told}"


@pytest.mark.parametrize(("quoted", "allowed"), [("true", True), (" FALSE ", False)])
def test_a_quoted_boolean_reaches_the_card(ws, quoted, allowed):
    options = [{"label": "Yes", "value": "yes"}, {"label": "No", "value": "no"}]
    arguments = {"question": "Tone?", "options": options, "allow_free_text": quoted}

    card = ws.call("ask_user", arguments)

    assert isinstance(card, Pause) and card.card["steps"][0]["allowFreeText"] is allowed


@pytest.mark.parametrize("value", ["yes", "1", 1])
def test_a_boolean_is_true_or_false_only(ws, value):
    refused = ws.outcome("ask_user", {"question": "Tone?", "allow_free_text": value})
    assert refused.is_error
    assert refused.content == (
        "Invalid input for ask_user at allow_free_text: Input should be a valid boolean"
    )


def test_a_property_sent_as_null_is_refused_not_taken_as_left_out(ws):
    result = ws.outcome("list_personas", {"offer_id": None})
    assert result.is_error
    assert result.content == (
        "Invalid input for list_personas at offer_id: Input should be left out rather than null"
    )
    assert not ws.outcome("list_personas", {}).is_error
