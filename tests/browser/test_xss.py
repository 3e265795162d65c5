"""Hostile text in model replies, workspace names and card options runs nothing in the
browser and fires no request."""

from __future__ import annotations

import re

from app.workspace.models import Offer
from tests.browser.helpers import log_in, new_chat
from tests.fake_model import Turn, text, tool_use
from tests.xss_payloads import XSS_PAYLOADS

# The page's own calls: a chat shown when its reply ends is marked read (static/queue.js).
ALLOWED_PATHS = re.compile(
    r"^/(static/.+|ws/chats/\d+|chats/\d+(/(messages|rows|stop|cards/[\w-]+))?|"
    r"api/chats/\d+/read|workspace/assets/\d+|favicon\.ico)$"
)
CAPTURE_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def test_payloads_execute_nothing_and_fire_no_request(
    page, live_server, person, fake_model, live_app, context
):
    payloads = list(XSS_PAYLOADS)
    assert len(payloads) >= 20
    with live_app.extensions["database"].session() as session:
        for payload in payloads[:8]:
            session.add(Offer(user_id=person[2], name=payload[:120], description=payload))
        session.commit()
    options = [
        {"label": p[:200], "value": f"v{n}", "description": p} for n, p in enumerate(payloads[8:16])
    ]
    fake_model.script(
        Turn(text("\n\n".join(payloads)), tool_use("select_offer", {"prompt": payloads[0]})),
    )
    dialogs, requests = [], []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    context.add_init_script(CAPTURE_VIOLATIONS)
    log_in(page, live_server)
    new_chat(page, live_server)
    page.wait_for_selector("#composer-input")
    page.on("request", lambda request: requests.append(request.url))

    page.fill("#composer-input", "Show me everything")
    page.keyboard.press("Enter")
    page.wait_for_selector(".card-q[data-status=awaiting]")
    page.wait_for_selector("#composer:not(.busy)")  # the run ended on its card
    # Dismiss it by asking a question whose card carries payloads in every option.
    fake_model.script(
        Turn(
            text(payloads[16]), tool_use("ask_user", {"question": payloads[17], "options": options})
        )
    )
    page.fill("#composer-input", "Ask me something")
    page.keyboard.press("Enter")
    page.wait_for_selector(f".card-q[data-status=awaiting] >> text={options[0]['label'][:20]}")
    page.reload()  # the same content rendered by the server, not only by the socket
    page.wait_for_selector(".card-q[data-status=awaiting]")
    page.wait_for_timeout(500)

    assert dialogs == []
    assert page.evaluate("window.__violations") == []
    unexpected = [
        url
        for url in requests
        if not ALLOWED_PATHS.match(url.split(live_server.url, 1)[-1].split("?")[0])
    ]
    assert unexpected == []
    injected = page.evaluate(
        """() => {
          const bad = [];
          const dangerousTag = ['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'SVG', 'MATH', 'BASE', 'META', 'LINK', 'STYLE'];
          for (const el of document.querySelectorAll('#rows *')) {
            const attrs = Array.from(el.attributes);
            const modelContent = el.closest('[hx-disable]') !== null && !el.hasAttribute('hx-disable');
            if (dangerousTag.includes(el.tagName.toUpperCase())
                || attrs.some((a) => /^(on|srcdoc|formaction)/i.test(a.name))
                || /^\\s*(javascript|data|vbscript):/i.test(el.getAttribute('href') || el.getAttribute('src') || '')
                || (modelContent && attrs.some((a) => /^(data-)?hx-/i.test(a.name)))
                || attrs.some((a) => /^(data-)?hx-(get|post|put|patch|delete)$/i.test(a.name) && !a.value.startsWith('/chats/'))) {
              bad.push(el.outerHTML.slice(0, 160));
            }
          }
          return bad;
        }"""
    )
    assert injected == []
    # The text is still there to read, escaped.
    assert "<script>alert(1)</script>" in page.inner_text("#rows")
