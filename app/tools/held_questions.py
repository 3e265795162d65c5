"""What a card holding a call asks, in the plain words of the run's steps."""

from __future__ import annotations

# The verbs a step label starts with, as a held call's question asks them (the label says
# what was done; the card asks whether to do it).
ASKED_VERBS = {
    "Asked": "Ask",
    "Checked": "Check",
    "Linked": "Link",
    "Looked": "Look",
    "Made": "Make",
    "Proposed": "Propose",
    "Read": "Read",
    "Saved": "Save",
    "Started": "Start",
    "Switched": "Switch",
    "Updated": "Update",
    "Wrote": "Write",
}
FALLBACK_QUESTION = "Allow this step: {label}?"


def held_question(label: str) -> str:
    """A step label as the question of a card that holds it: its verb asked, and "a"
    thing become "this" thing, the one the card shows ("Made an image": "Make this
    image?"); a label of another verb is asked whole."""
    verb, _, rest = label.partition(" ")
    asked = ASKED_VERBS.get(verb)
    if asked is None or not rest:
        return FALLBACK_QUESTION.format(label=label)
    article, _, thing = rest.partition(" ")
    if article in ("a", "an") and thing:
        rest = f"this {thing}"
    return f"{asked} {rest}?"
