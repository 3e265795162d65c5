"""The demo model's script: what it answers to one Messages API request, decided
statelessly from the request (system prompt, tools offered and the messages so far). It
walks the person through one real flow:

1. a new user message: a short text, then `list_offers`;
2. the offers: `select_offer` (with exactly one, `ad_copy` for it straight away; with
   none, a link to the Offers page);
3. the chosen offer: `ad_copy` for that offer;
4. the saved ad copy: a short presentation of the result.

It says it is the built-in demo model once a chat: not again once an assistant turn of
the history has said so.

A dismissed card or a failed tool gets a short apology. An agent's own call (a forced
`submit_<agent>` tool) gets a schema-valid answer for that agent as the tool's input
(app/llm/demo/agent_outputs.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from app.llm.demo.agent_outputs import BY_SLUG, BY_TOOL, agent_output, cut_to
from app.llm.demo.wire import (
    Reply,
    SeenResult,
    message_text,
    say,
    system_text,
    text_block,
    tool_results,
    tool_use_block,
)

CONFIGURE_HINT = "configure ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL for a real one"


def respond(body: dict[str, Any]) -> Reply:
    """The demo model's answer to one Messages API request body."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tools = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
    system = system_text(body.get("system"))
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "none":
        return say(
            "I'm the demo model, so I'll stop here: everything made so far is saved in your workspace."
        )
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "tool":
        return _forced_answer(str(tool_choice.get("name")), system, messages)
    if not tools:
        return say(_plain_answer(system, messages))
    if not messages or messages[-1].get("role") != "user":
        return say(_fallback())
    results = tool_results(messages)
    said = _said_demo(messages)
    if not results:
        return _start(tools, said)
    return _after_tools(results, tools, said)


def _said_demo(messages: list[dict[str, Any]]) -> bool:
    """Whether this chat was already told it is talking to the built-in demo model."""
    return any("demo model" in message_text(m) for m in messages if m.get("role") == "assistant")


def _fallback() -> str:
    return (
        "I'm the demo model (no AI model is configured), so I can only follow a fixed "
        "script: send me a message and I'll help you write ad copy for one of your offers."
    )


def _start(tools: set[str], said: bool) -> Reply:
    intro = (
        "Back to the script."
        if said
        else "I'm the built-in demo model (no AI model is configured), so I follow a fixed script."
    )
    if "list_offers" not in tools:
        return say(
            f"{intro} The tools that script needs are not available right now, so all I can "
            f"do is point you to the workspace. To get real answers, {CONFIGURE_HINT}."
        )
    return Reply(
        [text_block(f"{intro} Let me look at your offers."), tool_use_block("list_offers", {})],
        "tool_use",
    )


def _after_tools(results: list[SeenResult], tools: set[str], said: bool) -> Reply:
    for result in results:
        if result.is_error:
            problem = result.text.strip().splitlines()[0][:200] if result.text.strip() else ""
            detail = f" ({problem.rstrip('.')})" if problem else ""
            return say(
                f"Sorry, that step did not work out{detail}. I'm only the demo model, so I "
                "can't work around it: send a new message to start over."
            )
    for result in results:
        if isinstance(result.data, dict) and result.data.get("dismissed"):
            note = str(result.data.get("user_message") or "").strip()
            heard = f' I saw your note ("{note[:120]}"), but' if note else " But"
            return say(
                f"Sorry, no problem, I've stopped there.{heard} I'm only the demo model and "
                "follow a fixed script, so send a new message whenever you want to start again."
            )
    result = results[0]
    name = result.name or _guess_tool(result.data)
    if name == "list_offers":
        return _offers_listed(result, tools)
    if name == "select_offer":
        return _offer_selected(result, tools)
    if isinstance(result.data, dict) and "output_id" in result.data:
        return _output_saved(name, result.data, said)
    return say(
        "I'm the demo model, and my script has no next step for that. Send a new message "
        f"to go through it again, or {CONFIGURE_HINT}."
    )


def _guess_tool(data: Any) -> str | None:
    """Which tool a result came from when its tool_use is no longer in the history."""
    if isinstance(data, dict):
        if "output_id" in data:
            return data.get("agent")
        if "offer_id" in data and len(data) <= 3:
            return "select_offer"
        if isinstance(data.get("offers"), list):
            return "list_offers"
    return None


def _offers_listed(result: SeenResult, tools: set[str]) -> Reply:
    offers = _offers_in(result)
    if offers is not None and not offers:
        return say(
            "You don't have any offers yet. Add one on your [Offers page](/workspace/offers) "
            "(what you sell, who it is for), then send me a message and I'll write ad copy "
            "for it."
        )
    only = offers[0] if offers and len(offers) == 1 else None
    only_id = _first_offer_id([only]) if only is not None else None
    if only is not None and only_id is not None and "ad_copy" in tools:
        name = " ".join(str(only.get("name") or "").split())
        return _write_ad_copy(only_id, f"You have one offer, **{name}**, so I'll write for it.")
    if "select_offer" in tools:
        return Reply(
            [
                text_block("Here are your offers."),
                tool_use_block(
                    "select_offer", {"prompt": "Which offer should we write ad copy for?"}
                ),
            ],
            "tool_use",
        )
    offer_id = _first_offer_id(offers or [])
    if offer_id is not None and "ad_copy" in tools:
        return _write_ad_copy(offer_id, "I'll take your first offer.")
    return say(
        "I found your offers, but the demo script can't ask you to pick one right now. "
        f"I'm only the demo model; to go further, {CONFIGURE_HINT}."
    )


def _offer_selected(result: SeenResult, tools: set[str]) -> Reply:
    offer_id = _find_key(result.data, "offer_id")
    if not isinstance(offer_id, int) or isinstance(offer_id, bool):
        return say(
            "Sorry, I couldn't tell which offer you picked. I'm only the demo model: send a "
            "new message to try again."
        )
    if "ad_copy" not in tools:
        return say(
            "Great choice. The ad copy writer isn't available right now, though, and I'm only "
            f"the demo model. To go further, {CONFIGURE_HINT}."
        )
    return _write_ad_copy(offer_id, "Great choice.")


def _write_ad_copy(offer_id: int, opening: str) -> Reply:
    return Reply(
        [
            text_block(f"{opening} I'll ask the ad copy writer for three variants."),
            tool_use_block(
                "ad_copy",
                {
                    "instructions": "Write three ad variants for this offer, one each from the "
                    "angle of the pain, the outcome, and a short story. Keep the hooks short "
                    "and concrete.",
                    "offer_id": offer_id,
                },
            ),
        ],
        "tool_use",
    )


def _output_saved(name: str | None, data: dict[str, Any], said: bool) -> Reply:
    slug = str(data.get("agent") or (name or "").replace("_", "-"))
    label = BY_SLUG[slug].label if slug in BY_SLUG else "result"
    title = str(data.get("title") or "").strip() or "untitled"
    output = data.get("output")
    if not isinstance(output, dict):
        output = {}
    parts = {
        "variants": "variant",
        "questions": "question",
        "emails": "email",
        "sections": "section",
    }
    size = ""
    for key, noun in parts.items():
        if isinstance(items := output.get(key), list) and items:
            count = len(items)
            size = f" It has {count} {noun}{'s' if count != 1 else ''}, shown on the card above."
            break
    noun = "Your ad copy is" if slug == "ad-copy" else f"Your {label} is"
    closing = "" if said else f" This was the built-in demo model; {CONFIGURE_HINT}."
    return say(
        f"{noun} saved: **{title}**.{size} You can find it again under Outputs in your "
        f"workspace.{closing}"
    )


def _plain_answer(system: str, messages: list[dict[str, Any]]) -> str:
    """Calls outside the flow (summaries and the like): a short sensible text."""
    user_texts = [t for m in messages if m.get("role") == "user" and (t := message_text(m).strip())]
    asked = " ".join(f"{system}\n{user_texts[-1] if user_texts else ''}".lower().split())
    if "summar" in asked:
        first = " ".join((user_texts[0] if user_texts else "").split())
        topic = f' It started with "{first[:120]}".' if first else ""
        return (
            "Summary by the demo model: the person and the demo model went through the "
            f"scripted ad copy flow.{topic}"
        )
    if "title" in asked:
        return "Demo conversation"
    return _fallback()


def _forced_answer(tool_name: str, system: str, messages: list[dict[str, Any]]) -> Reply:
    """A structured call: an agent's answer (the forced tool names the agent, as in
    "submit_ad_copy") as that tool's input; anything else gets a plain sentence, as a
    model that cannot do it would answer."""
    if tool_name == "submit_title":
        return Reply([tool_use_block(tool_name, {"title": _demo_title(messages)})], "tool_use")
    if tool_name == "submit_memory_operations":
        operations = _memory_operations(message_text(messages[-1]) if messages else "")
        return Reply([tool_use_block(tool_name, {"operations": operations})], "tool_use")
    agent = BY_TOOL.get(tool_name)
    if agent is None:
        return say(_plain_answer(system, messages))
    context = "\n\n".join(message_text(m) for m in messages if m.get("role") == "user")
    output = agent_output(
        agent.slug, _json_section(context, "Offer"), _json_section(context, "Persona")
    )
    return Reply([tool_use_block(tool_name, output)], "tool_use")


# What the memory reconcile asks (app/memory/store.py): the facts held, then the new text.
_NEW_TEXT = "\n\nNew text:\n"
_FORGET = re.compile(r"^(please\s+)?forget\s+(that\s+)?", re.I)
DEMO_FACT_CHARS = 280


def _memory_operations(request: str) -> list[dict[str, str]]:
    """Each line of the new text as a fact to add ("forget ..." lines forget), skipping
    what is already held: a model that cannot judge keeps what it was told, as written."""
    held_part, _, new_text = request.partition(_NEW_TEXT)
    held = {line[2:].strip().lower() for line in held_part.splitlines() if line.startswith("- ")}
    operations = []
    for line in new_text.splitlines()[:60]:
        fact = cut_to(line.strip().lstrip("-*• ").strip(), DEMO_FACT_CHARS)
        if not fact:
            continue
        forgotten = _FORGET.sub("", fact)
        if forgotten != fact:
            operations.append({"op": "forget", "fact": forgotten.rstrip(".")})
        elif fact.lower() not in held:
            operations.append({"op": "add", "fact": fact, "reason": "Saved as written."})
    return operations


def _demo_title(messages: list[dict[str, Any]]) -> str:
    """A chat's title (app/chat/titles.py): the first words of the person's first message."""
    context = "\n".join(message_text(m) for m in messages if m.get("role") == "user")
    marker = "## The person's first message\n"
    said = context.split(marker, 1)[1].split("\n## ", 1)[0] if marker in context else context
    words = said.split()[:6]
    return cut_to(" ".join(words).rstrip(" ,.:;!?"), 60) or "Demo conversation"


def _find_key(data: Any, key: str) -> Any:
    """The first value stored under `key` anywhere in nested dicts and lists."""
    if isinstance(data, dict):
        if key in data:
            return data[key]
        values = list(data.values())
    elif isinstance(data, list):
        values = data
    else:
        return None
    for value in values:
        found = _find_key(value, key)
        if found is not None:
            return found
    return None


def _offers_in(result: SeenResult) -> list[Any] | None:
    """The offers a list_offers result lists: a list, or None when it cannot tell."""
    data = result.data
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("offers", "items", "results"):
            if isinstance(found := data.get(key), list):
                return found
        lists = [v for v in data.values() if isinstance(v, list)]
        if lists:
            return lists[0]
    text = result.text.strip().lower()
    if not text or "no offers" in text:
        return []
    return None


def _first_offer_id(offers: list[Any]) -> int | None:
    for offer in offers:
        if isinstance(offer, dict):
            value = offer.get("id", offer.get("offer_id"))
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _json_section(text: str, heading: str) -> dict[str, Any]:
    """The JSON object under a `## Heading` line of an agent's context message."""
    marker = f"## {heading}\n"
    at = text.find(marker)
    if at < 0:
        return {}
    start = text.find("{", at + len(marker))
    if start < 0:
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
