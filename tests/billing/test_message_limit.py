"""The default message limit, end to end: 40 messages in ten minutes are answered, the
41st is 429 RATE_LIMITED with Retry-After. With REDIS_URL set (the PostgreSQL + Redis pass)
the counts live in Redis."""

from __future__ import annotations


def test_the_41st_message_in_the_window_gets_429_with_retry_after(app, chat, fake_model):
    assert app.extensions["services"].settings.rate_limit_messages == "40 per 10 minutes"
    chat_id = chat.new_chat()
    for number in range(40):
        fake_model.script(f"Answer {number}.")
        assert chat.wait(chat.send(chat_id, f"Message {number}"))["status"] == "completed"

    refused = chat.post(f"/api/chats/{chat_id}/loop", {"message": "Message 41"})

    assert refused.status_code == 429
    assert refused.get_json()["error"]["code"] == "RATE_LIMITED"
    assert 0 < int(refused.headers["Retry-After"]) <= 600
    # The page's composer shares the budget and says so in the banner.
    page = chat.client.post(
        f"/chats/{chat_id}/messages",
        data={"message": "Message 41", "csrf_token": chat.auth.csrf},
        headers={"HX-Request": "true"},
    )
    assert page.status_code == 429
    assert "Too many messages" in page.get_data(as_text=True)
    assert 0 < int(page.headers["Retry-After"]) <= 600
    user_rows = [r for r in chat.rows(chat_id) if r["kind"] == "user"]
    assert len(user_rows) == 40
