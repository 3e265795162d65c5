"""A chat works in its project: its tools read that project's workspace only, and a
viewer's chat may read but every tool that writes (declared by its category, once) is
refused with a result the model reads."""

from __future__ import annotations

import pytest

from app.accounts.project_models import ProjectMember
from app.accounts.projects import create_project
from app.chat.models import Conversation
from app.tools.context import ToolContext
from app.tools.results import ToolResult
from app.workspace.models import Character, Offer
from tests.tools import make_workspace


@pytest.fixture
def shared(app):
    """Ada's workspace, and Bob's team project in which Ada has a chat, as `role`."""
    made = []

    def build(role: str):
        ws = make_workspace(app)
        made.append(ws)
        session = ws.session
        project = create_project(session, ws.bob.id, "Bob's team")
        session.add(ProjectMember(project_id=project.id, user_id=ws.ada.id, role=role))
        session.add(Offer(user_id=ws.bob.id, project_id=project.id, name="Team Offer"))
        chat = Conversation(user_id=ws.ada.id, project_id=project.id, title="Team chat")
        session.add(chat)
        session.commit()
        ws.ctx = ToolContext(
            session=session,
            user_id=ws.ada.id,
            conversation_id=chat.id,
            run_id=0,
            services=ws.services,
            emit=ws.events.append,
            chat_project_id=project.id,
        )
        return ws, project

    yield build
    for ws in made:
        ws.session.close()


def test_a_viewers_chat_reads_the_project_and_may_not_write(shared):
    ws, project = shared("viewer")
    listed = ws.call("list_offers").content
    assert "Team Offer" in str(listed)
    assert "Ada Coaching" not in str(listed)  # her personal workspace is not this chat's
    refused = ws.outcome("save_character", {"name": "Mira", "description": "A baker."})
    assert isinstance(refused, ToolResult) and refused.is_error
    assert refused.content == "Your role in this project (viewer) does not allow changes."
    assert ws.session.query(Character).filter_by(project_id=project.id).count() == 0


def test_an_editors_chat_writes_into_the_project(shared):
    ws, project = shared("editor")
    ws.call("save_character", {"name": "Mira", "description": "A baker."})
    saved = ws.session.query(Character).filter_by(name="Mira").one()
    assert (saved.project_id, saved.user_id) == (project.id, ws.ada.id)
    with pytest.raises(Exception, match="No offer with id"):
        ws.call("get_offer", {"offer_id": ws.ids["offer"]})  # her personal one: not here


def test_a_removed_members_chat_may_not_use_any_tool(shared):
    ws, _project = shared("editor")
    ws.session.query(ProjectMember).filter_by(user_id=ws.ada.id, role="editor").delete()
    ws.session.commit()
    refused = ws.outcome("list_offers")
    assert refused.is_error
    assert "no longer a member" in refused.content
