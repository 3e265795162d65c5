"""`GET /metrics` as an operator's Prometheus reads it: what a turn through the model
records, who may read it, the 429s by reason, the unauthenticated address of its own, and
several processes' records summed on one scrape (docs/observability.md, "Metrics")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.chat.models import QueuedMessage
from app.db import utcnow
from app.telemetry import metrics
from app.tools.registry import ACTION, ToolInput, tool
from app.tools.results import ToolResult, confirmation
from tests.factories import add_token, add_user, csrf_token_from, logged_in_driver
from tests.fake_model import Turn, text, tool_use

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"input_tokens": "input", "output_tokens": "output"}


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def samples(text_: str) -> dict[tuple[str, frozenset], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text_)
        for sample in family.samples
    }


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def scrape(client, token: str) -> dict:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type.startswith("text/plain")
    return samples(response.get_data(as_text=True))


def _admin_token(app) -> str:
    admin = add_user(app, "root@example.com", admin=True)
    return add_token(app, admin, "prometheus", scopes=("admin",))[1]


class HeroInput(ToolInput):
    name: str


def test_a_turn_with_a_held_call_is_counted_for_the_operator(app, auth, fake_model):
    app.extensions["services"].tools.add(
        tool(
            name="save_hero",
            description="Save a hero (asks first).",
            category=ACTION,
            input=HeroInput,
            phase="discovery",
            handler=lambda ctx, args: confirmation(
                args.model_dump(), "Saving changes your workspace.", f"Save {args.name}?"
            ),
            on_approved=lambda ctx, args: ToolResult({"saved": args["name"]}),
        )
    )
    token = _admin_token(app)
    chat = logged_in_driver(app, auth)
    before = scrape(auth.client, token)

    fake_model.script(
        Turn(
            text("Saving."),
            tool_use("no_such_tool", {}, id="toolu_gone"),
            tool_use("save_hero", {"name": "Mira"}, id="toolu_hold"),
        )
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Save Mira"))["status"] == "awaiting"
    fake_model.script("Saved Mira.")
    answered = chat.answer(chat_id, "toolu_hold", {"approved": True})
    assert chat.wait(answered.get_json()["runId"])["status"] == "completed"

    after = scrape(auth.client, token)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("loopdesk_runs_total", status="awaiting") == 1
    assert grew("loopdesk_runs_total", status="completed") == 1
    assert grew("loopdesk_run_duration_seconds_count", status="completed") == 1
    assert grew("loopdesk_tool_calls_total", tool="save_hero", outcome="held") == 1
    assert grew("loopdesk_tool_calls_total", tool="save_hero", outcome="ran") == 1
    # A name the model made up is no label of its own.
    assert grew("loopdesk_tool_calls_total", tool="unknown", outcome="refused") == 1
    assert grew("loopdesk_held_call_answers_total", tool="save_hero", answer="approved") == 1
    # The tokens are what the model server said it used, by model and kind.
    model = fake_model.replies[-1]["model"]
    assert grew("loopdesk_model_call_duration_seconds_count", model=model) == 2
    assert grew("loopdesk_model_time_to_first_token_seconds_count", model=model) == 2
    for key, kind in KINDS.items():
        served = sum(reply["usage"][key] for reply in fake_model.replies)
        assert grew("loopdesk_model_tokens_total", model=model, kind=kind) == served > 0
    # Read from the database at each scrape: nothing waits now; then a message a minute old.
    assert value(after, "loopdesk_queued_messages") == 0
    assert value(after, "loopdesk_runs_queued") == 0
    with app.extensions["database"].session() as session:
        sent = utcnow() - timedelta(seconds=60)
        session.add(QueuedMessage(conversation_id=chat_id, content="next", created_at=sent))
        session.commit()
    queued = scrape(auth.client, token)
    assert value(queued, "loopdesk_queued_messages") == 1
    assert value(queued, "loopdesk_queued_message_oldest_age_seconds") >= 60


def test_only_an_admin_reads_them(app, client, auth):
    admin = add_user(app, "root@example.com", admin=True)
    admin_token = add_token(app, admin, "p", scopes=("read", "admin"))[1]
    admin_reader = add_token(app, admin, "r", scopes=("read",))[1]
    ada = auth.create()
    ada_token = add_token(app, ada, "s", scopes=("read", "chat"))[1]

    def status(token: str | None = None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return client.get("/metrics", headers=headers).status_code

    assert status() == 401
    assert status("not-a-token") == 401
    assert status(ada_token) == 403
    assert status(admin_reader) == 403  # an admin's token without the admin scope
    assert status(admin_token) == 200
    auth.login()  # Ada's browser session
    assert status() == 403
    auth.login("root@example.com")
    assert status() == 200


def test_a_429_is_counted_by_its_reason(make_app):
    app = make_app(rate_limit_login_address="1 per minute")
    token = _admin_token(app)
    client = app.test_client()
    before = scrape(client, token)
    for expected in (200, 429):  # a failed login, then one too many from this address
        csrf = csrf_token_from(client.get("/login").get_data(as_text=True))
        data = {"email": "ada@example.com", "password": "wrong", "csrf_token": csrf}
        assert client.post("/login", data=data).status_code in (expected, 400)
    after = scrape(client, token)
    reason = {"reason": "limit:auth.login"}
    grown = value(after, "loopdesk_rate_limited_total", **reason) - value(
        before, "loopdesk_rate_limited_total", **reason
    )
    assert grown == 1


def test_the_address_of_their_own_answers_without_credentials(app):
    from app.cli import serve_metrics

    app.config["LOOPDESK"] = app.config["LOOPDESK"].model_copy(
        update={"metrics_address": "127.0.0.1:0"}
    )
    server = serve_metrics(app)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            scraped = samples(response.read().decode())
        assert ("loopdesk_queued_messages", frozenset()) in scraped
        assert ("loopdesk_open_sockets", frozenset()) in scraped
    finally:
        server.shutdown()
        server.server_close()


# Two processes record into one directory, as gunicorn's workers do; the module is loaded
# on its own (it imports nothing of the app), so each process costs only prometheus_client.
RECORDER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("recorder", sys.argv[1])
metrics = sys.modules["recorder"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(metrics)
metrics.tool_called("save_hero", "ran")
metrics.socket_opened()
metrics.model_call("m", 0.0, 0.0, {"input_tokens": 10, "output_tokens": 3})
print("recorded", flush=True)
sys.stdin.read()  # alive until told to end: its open socket counts while it lives
"""


def test_processes_are_summed_on_one_scrape(tmp_path, monkeypatch):
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    source = str(ROOT / "app" / "telemetry" / "metrics.py")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", RECORDER, source],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        assert [w.stdout.readline().strip() for w in workers] == ["recorded", "recorded"]
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        scraped = samples(metrics.scrape()[0].decode())
        assert value(scraped, "loopdesk_tool_calls_total", tool="save_hero", outcome="ran") == 2
        assert value(scraped, "loopdesk_model_tokens_total", model="m", kind="input") == 20
        assert value(scraped, "loopdesk_model_call_duration_seconds_count", model="m") == 2
        assert value(scraped, "loopdesk_open_sockets") == 2
        # A worker that died no longer holds its sockets (gunicorn's child_exit).
        workers[0].communicate("")
        metrics.process_ended(workers[0].pid)
        scraped = samples(metrics.scrape()[0].decode())
        assert value(scraped, "loopdesk_open_sockets") == 1
        assert value(scraped, "loopdesk_tool_calls_total", tool="save_hero", outcome="ran") == 2
    finally:
        for worker in workers:
            worker.kill()
            worker.communicate()


def test_the_sample_dashboard_names_only_metrics_that_exist():
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    named = {
        re.sub(r"_(bucket|sum|count|total)$", "", name)
        for expr in exprs
        for name in re.findall(r"\bloopdesk_[a-z_]+", expr)
    }
    queue = metrics.QueueCollector(lambda: metrics.QueueDepth(0, 0, 0, 0))
    declared = {
        family.name
        for family in [*metrics.registry().collect(), *queue.collect()]
        if family.name.startswith("loopdesk_")
    }
    assert named and named <= declared, named - declared
    assert len(exprs) >= 8
