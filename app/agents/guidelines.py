"""Shared guidelines every agent follows, appended with per-rule de-duplication."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.config import PROJECT_ROOT

GUIDELINES_FILE = PROJECT_ROOT / "prompts" / "shared-guidelines.md"


@dataclass(frozen=True)
class Guideline:
    id: str
    text: str


def _normalize(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", "", re.sub(r"\s+", " ", text.lower())).strip()


def guidelines_from_file() -> list[Guideline]:
    """`- [id] rule text` lines of prompts/shared-guidelines.md."""
    rules = []
    for line in GUIDELINES_FILE.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^- \[([a-z0-9-]+)\]\s+(.+)$", line.strip())
        if match:
            rules.append(Guideline(match.group(1), match.group(2).strip()))
    return rules


def append_guidelines(prompt: str, rules: list[Guideline]) -> str:
    """The prompt plus every rule it does not already state, each exactly once."""
    stated = _normalize(prompt)
    seen: set[str] = set()
    missing = []
    for rule in rules:
        key = _normalize(rule.text)
        if key and key not in stated and key not in seen:
            seen.add(key)
            missing.append(rule.text)
    if not missing:
        return prompt
    lines = "\n".join(f"- {text}" for text in missing)
    return f"{prompt}\n\n## Shared guidelines\n{lines}"
