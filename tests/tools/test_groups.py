"""Tool groups are derived from the declarations: every tool the process offers has one,
the cards that ask the person are always on, and the groups a preset may turn on are the
subjects a person reads, not a hand-kept list."""

from __future__ import annotations

from app.agents.catalog import load_agents
from app.tools.build import build_registry
from app.tools.groups import ALWAYS_ON, CAMPAIGNS, IMAGES, groups_of, is_on
from app.tools.registry import READ, UI, NoInput, ToolRegistry


def _by_group() -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for tool in build_registry(load_agents()).all():
        assert tool.group is not None, f"{tool.name}: give its module's registry a group"
        grouped.setdefault(tool.group.key, set()).add(tool.name)
    return grouped


def test_every_tool_is_in_the_group_of_its_subject():
    grouped = _by_group()
    assert {"select_offer", "ask_user", "select_project", "set_phase", "remember"} <= grouped[
        "always"
    ]
    assert {"quiz", "ad_copy", "email_sequence", "landing_page"} == grouped["writing"]
    assert {"generate_image", "list_image_presets", "create_storyboard"} <= grouped["images"]
    assert {"start_campaign", "get_campaign_status"} == grouped["campaigns"]
    assert {"fetch_url", "read_attachment"} == grouped["outside_content"]
    assert {"list_offers", "get_persona"} <= grouped["workspace"]


def test_the_groups_offered_follow_the_registry_and_leave_questions_always_on():
    tools = build_registry(load_agents()).all()
    keys = [group.key for group in groups_of(tools, web_search=False)]
    assert "always" not in keys and "web_search" not in keys
    assert keys[-1] == "mcp"  # anyone may add a server, so it is always a choice
    assert "web_search" in [group.key for group in groups_of(tools, web_search=True)]
    asks = next(tool for tool in tools if tool.name == "ask_user")
    assert is_on(asks, frozenset()) and not is_on(
        next(tool for tool in tools if tool.name == "quiz"), frozenset({"images"})
    )


def test_a_tool_joins_its_modules_group_unless_it_names_another_and_a_card_is_always_on():
    registry = ToolRegistry(group=IMAGES)

    @registry.tool(name="lookup", description="d", category=READ, input=NoInput)
    def lookup(ctx, args):
        return ""

    @registry.tool(name="status", description="d", category=READ, input=NoInput, group=CAMPAIGNS)
    def status(ctx, args):
        return ""

    @registry.tool(name="ask", description="d", category=UI, input=NoInput, group=CAMPAIGNS)
    def ask(ctx, args):
        return ""

    assert [registry.get(name).group for name in ("lookup", "status", "ask")] == [
        IMAGES,
        CAMPAIGNS,
        ALWAYS_ON,
    ]
