"""Tool groups: what a person turns on or off in a preset, by subject ("Images and
video", "Writing agents"). Each tool names its group where it is declared (its module's
`ToolRegistry(group=...)`, or `tool(..., group=...)` for one that differs), so the groups a
person is offered are derived from the registry and never drift from it: a new tool joins
its module's group, and a new subject declares its own.

The cards that ask the person (questionnaires, select_project) and the chat's own switches
(set_phase, remember) are in `ALWAYS_ON`: a preset never turns them off."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ToolGroup:
    key: str  # what a preset stores and the API takes
    label: str  # what a person reads
    description: str = ""
    # Never turned off: asking the person and the chat's own switches.
    always_on: bool = False


ALWAYS_ON = ToolGroup(
    "always", "Questions and the chat's own switches", "Cards that ask you", always_on=True
)
WORKSPACE = ToolGroup(
    "workspace", "Offers and personas", "Look up your offers, personas, assets and saved work"
)
OUTSIDE_CONTENT = ToolGroup(
    "outside_content", "Web pages and attached files", "Read a page you name or a file you attach"
)
WRITING = ToolGroup(
    "writing", "Writing agents", "Quizzes, ad copy, email sequences and landing pages"
)
IMAGES = ToolGroup(
    "images", "Images and video", "Generate images and video, element sheets and storyboards"
)
CHARACTERS = ToolGroup("characters", "Characters", "Save characters and propose a cast")
CAMPAIGNS = ToolGroup("campaigns", "Campaigns", "Save and start campaigns for an offer")
MCP_TOOLS = ToolGroup("mcp", "MCP tools", "Tools of the MCP servers you may call")
# The provider's web search is no tool of ours (app/llm/web_search.py) but is offered
# beside them where WEB_SEARCH says so; a preset may leave it out all the same.
WEB_SEARCH = ToolGroup("web_search", "Web search", "Search the web (where it is set up)")


class Grouped(Protocol):
    """A declared tool, as far as its group goes (app/tools/registry.py's `Tool`)."""

    @property
    def group(self) -> ToolGroup | None: ...


def groups_of(tools: Iterable[Grouped], web_search: bool) -> list[ToolGroup]:
    """The groups a person may turn on or off, in the order the model sees their tools:
    those of these tools (the process's registry), then MCP tools (anyone may add a
    server) and web search where it is offered."""
    found: dict[str, ToolGroup] = {}
    for tool in tools:
        if tool.group is not None and not tool.group.always_on:
            found.setdefault(tool.group.key, tool.group)
    found.setdefault(MCP_TOOLS.key, MCP_TOOLS)
    if web_search:
        found.setdefault(WEB_SEARCH.key, WEB_SEARCH)
    return list(found.values())


def is_on(tool: Grouped, groups: frozenset[str] | None) -> bool:
    """Whether a tool is offered when only `groups` are on (None: no preset, all are)."""
    if groups is None or tool.group is None or tool.group.always_on:
        return True
    return tool.group.key in groups
