"""What the demo model writes for each agent it knows: a plausible, schema-valid output
(prompts/agents/*.md declare the schemas) built from the offer the agent was given.

The demo recognises an agent by its declared name only, as the forced tool that name
gives it ("Ad copy" answers in `submit_ad_copy`, app/agents/outputs.py), never by words of
its prompt: editing a prompt cannot break the demo, and a test checks every agent of the
catalog has its entry here."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def agent_output(
    slug: str, offer: dict[str, Any], persona: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A plausible, schema-valid output of one agent for an offer."""
    name = " ".join(str(offer.get("name") or "").split()) or "Your offer"
    persona = persona or {}
    details = _Details(
        name=name,
        description=_sentence(offer.get("description")),
        audience=_sentence(offer.get("audience")),
        persona=" ".join(str(persona.get("name") or "").split()),
        price=" ".join(str(offer.get("price") or "").split()),
        pains=_sentence(persona.get("pains")),
        goals=_sentence(persona.get("goals")),
    )
    return BY_SLUG[slug].write(details)


@dataclass
class _Details:
    name: str
    description: str
    audience: str
    persona: str
    price: str = ""
    pains: str = ""
    goals: str = ""

    @property
    def who(self) -> str:
        return self.audience or "People like you, who want this handled well."

    @property
    def what(self) -> str:
        return self.description or f"{self.name} is built for exactly this."


def cut_to(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 3].rstrip(" ,.:;") + "..."


def _sentence(value: Any) -> str:
    text = " ".join(str(value or "").split())
    if text and text[-1] not in ".!?":
        text += "."
    return text


def _first_words(text: str, words: int = 14) -> str:
    """The opening of a text as a hook: its first sentence, at most `words` words."""
    sentence = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    cut = sentence.split()[:words]
    return " ".join(cut).rstrip(" ,;:") + ("." if len(cut) < len(sentence.split()) else "")


def _paragraphs(*texts: str) -> str:
    return "\n\n".join(text for text in texts if text)


def _ad_copy(d: _Details) -> dict[str, Any]:
    """Three ads written from the offer's own words (its audience, description and price,
    and the persona's pains and goals when one is given): nothing invented, as the ad
    copy agent's prompt asks (prompts/agents/ad-copy.md)."""
    reader = f" for {d.persona}" if d.persona else ""
    pain = d.pains or d.audience
    outcome = d.goals or d.description
    price = f"{d.name}: {d.price}" if d.price else ""
    return {
        "title": f"{d.name}: three ad angles",
        "angle_notes": f"Demo model sample{reader}, built from the offer's own text: one ad "
        "each for the pain, the outcome and the offer itself. Rewrite them in your voice "
        "before running them.",
        "variants": [
            {
                "angle": "Pain",
                "hook": _first_words(pain) if pain else f"{d.name} is for you.",
                "primary_text": _paragraphs(
                    d.who, d.pains, d.what, "If that sounds like you, take a closer look below."
                ),
                "headline": cut_to(f"{d.name}: made for you", 60),
                "call_to_action": "Learn more",
            },
            {
                "angle": "Outcome",
                "hook": _first_words(outcome) if outcome else f"See what {d.name} does.",
                "primary_text": _paragraphs(d.what, d.goals, f"See how {d.name} works.", price),
                "headline": cut_to(f"{d.name}: see how it works", 60),
                "call_to_action": "See how it works",
            },
            {
                "angle": "Offer",
                "hook": cut_to(f"{d.name}, {d.price}." if d.price else f"Meet {d.name}.", 90),
                "primary_text": _paragraphs(d.what, d.who, price, "Start with the link below."),
                "headline": cut_to(f"{d.name}: start today", 60),
                "call_to_action": "Get started",
            },
        ],
    }


QUIZ_KEYS = ("stretched", "stuck", "ready")


def _option(label: str, main: str, side: str | None = None) -> dict[str, Any]:
    """A quiz answer: 3 points to its main result, 1 to a side one."""
    scores = {key: 0 for key in QUIZ_KEYS}
    scores[main] = 3
    if side:
        scores[side] = 1
    return {"label": label, "scores": scores}


def _quiz(d: _Details) -> dict[str, Any]:
    return {
        "title": f"Which path fits you? A quiz from {d.name}",
        "intro": "Five quick questions, no wrong answers. Find out where you stand and what "
        f"would help most right now. (A demo model sample for {d.name}.)",
        "questions": _quiz_questions(),
        "results": _quiz_results(d),
    }


def _quiz_questions() -> list[dict[str, Any]]:
    return [
        {
            "question": "What does a typical Monday look like for you?",
            "options": [
                _option("Back to back from the first minute", "stretched", "stuck"),
                _option("Busy, but the same problems as last week", "stuck"),
                _option("Planned, and I want to level up", "ready", "stuck"),
            ],
        },
        {
            "question": "When this problem comes up, what do you usually do?",
            "options": [
                _option("Push it to later, again", "stretched"),
                _option("Try a new fix that doesn't last", "stuck", "stretched"),
                _option("Look for someone who has solved it", "ready"),
            ],
        },
        {
            "question": "Which sentence sounds most like you?",
            "options": [
                _option("I don't have time to think about it", "stretched"),
                _option("I've tried, it just doesn't stick", "stuck"),
                _option("I know what I want, I need the right help", "ready", "stuck"),
            ],
        },
        {
            "question": "What would feel like a win a month from now?",
            "options": [
                _option("One calm hour a day", "stretched", "ready"),
                _option("A routine that finally holds", "stuck"),
                _option("Clear, visible progress", "ready"),
            ],
        },
        {
            "question": "How do you like to get help?",
            "options": [
                _option("Quick and done for me", "stretched"),
                _option("Step by step, with a plan", "stuck", "ready"),
                _option("Hands on, with someone to ask", "ready"),
            ],
        },
    ]


def _quiz_results(d: _Details) -> list[dict[str, Any]]:
    return [
        {
            "key": "stretched",
            "headline": "You're stretched thin",
            "description": "You are carrying a lot and this keeps sliding down the list. "
            f"It's not a motivation problem, it's a capacity one. {d.what}",
            "call_to_action": f"See how {d.name} takes it off your plate",
        },
        {
            "key": "stuck",
            "headline": "You're stuck in a loop",
            "description": "You've tried to fix this more than once and it keeps coming "
            f"back. What's missing is a structure that lasts. {d.what}",
            "call_to_action": f"Break the loop with {d.name}",
        },
        {
            "key": "ready",
            "headline": "You're ready for the next step",
            "description": "You know what you want and you're ready to act. The right "
            f"help now saves you months. {d.what}",
            "call_to_action": f"Start with {d.name}",
        },
    ]


def _email_sequence(d: _Details) -> dict[str, Any]:
    sign_off = f"\n\nWarmly,\nThe {d.name} team"
    return {
        "title": f"{d.name}: welcome sequence",
        "goal": f"Turn new subscribers into people who try {d.name}.",
        "emails": [
            {
                "day": 0,
                "subject": cut_to(f"Welcome to {d.name}", 80),
                "preview": "Here's what to expect, and one small thing to try today.",
                "body": f"Hi there,\n\nThanks for joining us. {d.what}\n\nOver the next few "
                "days we'll send a handful of short emails, each with one useful idea. Today's: "
                "write down the one thing you'd most like to fix this month. We'll come back to "
                f"it.{sign_off}",
            },
            {
                "day": 2,
                "subject": "The real problem isn't what you think",
                "preview": "Why the usual fixes don't stick.",
                "body": "Hi again,\n\nMost people try to solve this with more effort. It rarely "
                "works, because the problem isn't effort, it's the system around it.\n\n"
                f"{d.who} We hear that again and again.\n\nTomorrow: what changes when the "
                f"system changes.{sign_off}",
            },
            {
                "day": 4,
                "subject": "What changes when the system changes",
                "preview": "A short story from someone like you.",
                "body": "Hi,\n\n[Customer story: the situation before, what they tried, and "
                "what changed.]\n\nThe details differ for everyone, but the pattern is the "
                f"same: a clear structure and a little support.{sign_off}",
            },
            {
                "day": 6,
                "subject": "But will it work for me?",
                "preview": "The three questions people ask before they start.",
                "body": "Hi,\n\nBefore starting, people usually ask: Do I have time for this? "
                "Is it right for my situation? What if I fall off?\n\nFair questions. "
                f"{d.what} Reply to this email with yours and we'll answer it personally."
                f"{sign_off}",
            },
            {
                "day": 8,
                "subject": cut_to(f"Your invitation to {d.name}", 80),
                "preview": "Everything you need to start, in one place.",
                "body": f"Hi,\n\nIf the last few emails rang true, this is your moment. {d.what}"
                f"\n\nYou can start today. Follow the link to see how {d.name} works and take "
                f"the first step.{sign_off}",
            },
        ],
    }


def _landing_page(d: _Details) -> dict[str, Any]:
    return {
        "title": f"{d.name} landing page",
        "hero": {
            "headline": f"Get this handled, for good, with {d.name}",
            "subheadline": d.what,
            "call_to_action": "Get started",
        },
        "sections": _landing_sections(d),
        "faq": _landing_faq(d),
        "final_call_to_action": f"Get this handled for good. Start with {d.name} today.",
    }


def _landing_sections(d: _Details) -> list[dict[str, Any]]:
    return [
        {
            "heading": "Sound familiar?",
            "body": f"{d.who} You've tried to fix it on your own, and it keeps coming back.",
        },
        {
            "heading": f"Meet {d.name}",
            "body": f"{d.what} It gives you a clear structure and the support to stick with it.",
        },
        {
            "heading": "What you get",
            "body": "Concrete changes you notice in the first weeks.",
            "bullets": [
                "A clear plan that fits your week",
                "Less time lost to the same old problem",
                "Support when you get stuck",
                "Progress you can see",
            ],
        },
        {
            "heading": "How it works",
            "body": "Three simple steps.",
            "bullets": [
                "Tell us where you are today",
                "Get a plan made for your situation",
                "Follow it, with help along the way",
            ],
        },
        {
            "heading": "What people say",
            "body": "[Customer quote about the result] [Customer name and role]",
        },
    ]


def _landing_faq(d: _Details) -> list[dict[str, Any]]:
    return [
        {
            "question": "I'm short on time. Is this for me?",
            "answer": f"{d.name} is built for busy people: it fits around your week "
            "instead of adding to it.",
        },
        {
            "question": "What if I've tried things like this before?",
            "answer": "Most people have. The difference is a structure that lasts and "
            "support when it gets hard.",
        },
        {
            "question": "How much does it cost?",
            "answer": "You'll see the full price before you commit to anything.",
        },
        {
            "question": "Will it work for my situation?",
            "answer": "Tell us where you are and we'll be honest about whether it fits.",
        },
    ]


@dataclass(frozen=True)
class ScriptedAgent:
    tool: str  # the forced tool its declared name gives it
    slug: str  # its prompt file's name, which an agent tool's result names it by
    label: str  # what the demo calls its output
    write: Callable[[_Details], dict[str, Any]]


SCRIPTED_AGENTS = (
    ScriptedAgent("submit_ad_copy", "ad-copy", "ad copy", _ad_copy),
    ScriptedAgent("submit_quiz", "quiz", "quiz", _quiz),
    ScriptedAgent("submit_email_sequence", "email-sequence", "email sequence", _email_sequence),
    ScriptedAgent("submit_landing_page", "landing-page", "landing page", _landing_page),
)
BY_TOOL = {agent.tool: agent for agent in SCRIPTED_AGENTS}
BY_SLUG = {agent.slug: agent for agent in SCRIPTED_AGENTS}
