"""The host's system prompt: stable parts first, so the prefix stays cache-friendly."""

from __future__ import annotations

from functools import lru_cache

from app.chat.models import Conversation
from app.chat.toolset import capability_notes
from app.config import PROJECT_ROOT
from app.tools.registry import Tool

HOST_PROMPT_FILE = PROJECT_ROOT / "prompts" / "host.md"


@lru_cache(maxsize=1)
def host_prompt() -> str:
    return HOST_PROMPT_FILE.read_text(encoding="utf-8").strip()


def build_system_prompt(
    conversation: Conversation,
    tools: list[Tool],
    about_person: str = "",
    project: str = "",
    preset: str = "",
) -> str:
    """Host prompt and capability notes (stable), then the chat's project (for a person
    in several), the person's memory (changes rarely), the chat's preset's instructions
    (the person's, below the rules above: app/chat/presets.py), then the conversation's
    summary (changes as it grows)."""
    parts = [host_prompt(), capability_notes(tools), project, about_person, preset]
    if conversation.summary:
        parts.append(f"## Summary of the earlier conversation\n{conversation.summary}")
    return "\n\n".join(part for part in parts if part)
