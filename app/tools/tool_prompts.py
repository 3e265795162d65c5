"""The system prompts of the tools that have the fast model write (a cast list, an element
sheet, a storyboard): one Markdown file each in prompts/tools/, beside the agents' own,
read once per process."""

from __future__ import annotations

from functools import cache

from app.config import PROJECT_ROOT

TOOL_PROMPTS_DIR = PROJECT_ROOT / "prompts" / "tools"


@cache
def tool_prompt(name: str) -> str:
    """prompts/tools/<name>.md, without its final newline."""
    return (TOOL_PROMPTS_DIR / f"{name}.md").read_text(encoding="utf-8").rstrip("\n")
