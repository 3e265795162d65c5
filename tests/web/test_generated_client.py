"""A client generated from /api/openapi.json with openapi-python-client drives the API of
a real server unmodified: create a chat, send a message, read its rows, search, both
exports and the offers. What it cannot do as generated is a bug in the document."""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
import zipfile

import pytest

from app.chat.models import RunStatus
from tests.factories import add_token, add_user
from tests.fake_model import Turn, text
from tests.live import LiveServer
from tests.waiting import eventually

PACKAGE = "loopdesk_client"
# application/zip is bytes like application/octet-stream, the one binary type the
# generator reads as a File: its documented option says so (no change to the client).
GENERATOR_CONFIG = (
    "content_type_overrides:\n"
    "  application/zip: application/octet-stream\n"
    "  image/*: application/octet-stream\n"
)


@pytest.fixture
def server(app_on_fake_model):
    live = LiveServer(app_on_fake_model).start()
    yield live
    live.stop()


@pytest.fixture
def generated(server, tmp_path):
    """The client package generated from the served document (offline, about a second)."""
    import httpx

    spec = tmp_path / "openapi.json"
    spec.write_text(httpx.get(f"{server.url}/api/openapi.json").text)
    config = tmp_path / "generator.yaml"
    config.write_text(GENERATOR_CONFIG)
    done = subprocess.run(
        [
            f"{sys.prefix}/bin/openapi-python-client",
            "generate",
            "--path",
            str(spec),
            "--output-path",
            str(tmp_path / PACKAGE),
            "--meta",
            "none",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout, done.stdout  # every operation and response generated
    sys.path.insert(0, str(tmp_path))
    yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def _finished(get_run, client, run_id: int):
    """The run once it has ended, read through the client (the state, not a pause)."""
    last = []

    def ended():
        last[:] = [get_run.sync(run_id, client=client)]
        return last[0] if last[0].status not in (RunStatus.QUEUED, RunStatus.RUNNING) else None

    return eventually(ended, 10, lambda: f"run {run_id} still {last[0].status}")


def test_a_generated_client_drives_the_api_unmodified(
    app_on_fake_model, server, fake_model, generated
):
    app = app_on_fake_model
    _, raw = add_token(app, add_user(app, "ada@example.com"))
    api = generated("api.default")
    models = generated("models")
    client = generated("client").AuthenticatedClient(base_url=server.url, token=raw)

    def call(operation: str, *args, **kwargs):
        return importlib.import_module(f"{api.__name__}.{operation}").sync(
            *args, client=client, **kwargs
        )

    # Chats: create one, send a message, read its rows.
    created = call("api_create_chat_post", body=models.ChatCreate(title="Spring launch"))
    assert isinstance(created, models.ChatCreated)
    fake_model.script(Turn(text("Mornings are calmer with a plan.")))
    started = call("api_loop_post", created.id, body=models.NewMessage(message="How are mornings?"))
    assert isinstance(started, models.RunStarted)
    run = _finished(
        importlib.import_module(f"{api.__name__}.api_get_run_get"), client, started.run_id
    )
    assert run.status == RunStatus.COMPLETED
    rows = call("api_list_messages_get", created.id)
    assert [(row.role, row.content) for row in rows.messages] == [
        ("user", "How are mornings?"),
        ("assistant", "Mornings are calmer with a plan."),
    ]
    chats = call("api_list_chats_get")
    assert [chat.id for chat in chats.chats] == [created.id]

    # Search finds the reply.
    found = call("search_api_search_get", q="calmer")
    assert [hit.chat.id for hit in found.hits] == [created.id]

    # Both exports: the chat as JSON, all the data as a zip.
    exported = call(
        "export_export_chat_api_get",
        created.id,
        format_=models.ExportExportChatApiGetFormat.JSON,
    )
    assert isinstance(exported, models.ChatExport)
    assert exported.chat["title"] == "Spring launch"
    assert [row["content"] for row in exported.to_dict()["messages"]][-1] == (
        "Mornings are calmer with a plan."
    )
    archive = call("export_download_all_api_get")
    names = zipfile.ZipFile(io.BytesIO(archive.payload.read())).namelist()
    assert any(name.endswith(".json") for name in names)

    # Offers: create, list, read, change, delete.
    offer = call(
        "workspace_api_create_offer_post",
        body=models.WorkspaceApiCreateOfferPostBody(name="Calm Mornings", price="49"),
    )
    assert isinstance(offer, models.OfferOut) and offer.name == "Calm Mornings"
    listed = call("workspace_api_list_offers_get")
    assert [item.id for item in listed.items] == [offer.id] and listed.next_cursor is None
    assert call("workspace_api_offer_get", offer.id).price == "49"
    changed = call(
        "workspace_api_offer_patch",
        offer.id,
        body=models.WorkspaceApiOfferPatchBody(price="59"),
    )
    assert (changed.name, changed.price) == ("Calm Mornings", "59")
    deleted = importlib.import_module(f"{api.__name__}.workspace_api_offer_delete")
    assert deleted.sync_detailed(offer.id, client=client).status_code == 204

    # An error is parsed as documented: the code is the registry's enum.
    gone = call("workspace_api_offer_get", offer.id)
    assert isinstance(gone, models.ErrorOut)
    assert gone.error.code == models.ErrorCode.NOT_FOUND
