"""The chat's project: a card asking which of the person's projects a chat works in
(offered by app/chat/toolset.py only to a person in several projects while the chat's
project was never chosen; app/chat/turns.py moves the chat when it is answered)."""

from __future__ import annotations

from typing import Any

from app.accounts.projects import projects_of
from app.row_meta import Card
from app.tools.context import ToolContext
from app.tools.groups import ALWAYS_ON
from app.tools.questionnaire import MAX_OPTIONS, card, option, step
from app.tools.registry import UI, ToolRegistry
from app.tools.results import Pause
from app.tools.ui import PromptInput

REGISTRY = ToolRegistry(group=ALWAYS_ON)


SELECT_PROJECT = "select_project"


def check_project_answer(ctx: ToolContext, card_spec: Card, result: Any) -> str | None:
    """The answer names a project the person is a member of (now, not when asked)."""
    if not isinstance(result, dict) or "project_id" not in result:
        return "The answer must include 'project_id'."
    chosen = result["project_id"]
    mine = {project.id for project, _role in projects_of(ctx.session, ctx.user_id)}
    if isinstance(chosen, bool) or not isinstance(chosen, int) or chosen not in mine:
        return f"No project with id {chosen} was found."
    return None


@REGISTRY.tool(
    name=SELECT_PROJECT,
    description=(
        "Ask the person which of their projects this chat is about, as cards. Use it when "
        "they belong to several projects and their request does not say which workspace it "
        'concerns. The run pauses; you get {"project_id": <id>} back, and from then on this '
        "chat reads and writes that project's workspace."
    ),
    note="select_project: ask which of the person's projects this chat works in.",
    category=UI,
    input=PromptInput,
    check_response=check_project_answer,
    label="Asked you to choose a project",
)
def select_project(ctx: ToolContext, args: PromptInput) -> Pause:
    options = [
        option(
            project.id,
            "Personal" if project.personal else project.name,
            f"Your role: {role}",
        )
        for project, role in projects_of(ctx.session, ctx.user_id)
    ][:MAX_OPTIONS]
    steps = [step("project", "Project", "single", options)]
    return Pause(
        card(
            (args.prompt or "").strip() or "Which project is this chat for?",
            steps,
            submit_label="Use this project",
            result_key="project_id",
        )
    )
