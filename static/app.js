// Small behaviours htmx does not cover. No inline scripts: the CSP forbids them.
"use strict";

const Loopdesk = (() => {
  // Rows are keyed by sequence: a row pushed twice replaces itself and rows stay ordered.
  function normalizeRows(container) {
    const seen = new Map();
    for (const row of Array.from(container.children)) {
      if (!row.id) continue;
      const earlier = seen.get(row.id);
      if (earlier) {
        earlier.replaceWith(row);
      }
      seen.set(row.id, row);
    }
    const rows = Array.from(container.children).filter((el) => el.dataset.sequence);
    for (let i = 1; i < rows.length; i++) {
      const seq = Number(rows[i].dataset.sequence);
      let j = i - 1;
      while (j >= 0 && Number(rows[j].dataset.sequence) > seq) j--;
      if (j !== i - 1) container.insertBefore(rows[i], rows[j + 1]);
    }
    const empty = document.getElementById("rows-empty");
    if (empty && rows.length) empty.remove();
  }

  function lastSequence(container) {
    let last = 0;
    for (const row of container.querySelectorAll("[data-sequence]")) {
      last = Math.max(last, Number(row.dataset.sequence));
    }
    return last;
  }

  function nearBottom(el) {
    return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
  }

  function watchChat() {
    const chat = document.getElementById("chat");
    const rows = document.getElementById("rows");
    if (!chat || !rows) return;
    let stick = true;
    chat.addEventListener("scroll", () => { stick = nearBottom(chat); });
    const observer = new MutationObserver(() => {
      observer.disconnect();
      normalizeRows(rows);
      observer.observe(rows, { childList: true });
      if (stick) chat.scrollTop = chat.scrollHeight;
    });
    observer.observe(rows, { childList: true });
    new MutationObserver(() => { if (stick) chat.scrollTop = chat.scrollHeight; })
      .observe(chat, { childList: true, subtree: true, characterData: true });
    chat.scrollTop = chat.scrollHeight;

    // Every (re)connect: tell the server the last row we hold; having subscribed first,
    // it sends the rows persisted since, so nothing falls between fetch and subscribe.
    document.body.addEventListener("htmx:wsOpen", (event) => {
      // ...and the branch it shows, so a branch switch missed meanwhile is sent whole.
      const branch = document.getElementById("branch-state");
      event.detail.socketWrapper.sendImmediately(JSON.stringify({
        after: lastSequence(rows), branch: branch ? branch.dataset.branch : undefined,
      }));
      document.body.dataset.socket = "open";
    });
    document.body.addEventListener("htmx:wsClose", () => {
      document.body.dataset.socket = "closed";
    });
  }

  function wireComposer() {
    document.addEventListener("keydown", (event) => {
      const input = event.target;
      if (input.id !== "composer-input" || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      if (input.value.trim()) input.form.requestSubmit();
    });
    document.body.addEventListener("htmx:afterSwap", (event) => {
      if (event.detail.target.id === "composer") {
        const input = document.getElementById("composer-input");
        if (input && !input.disabled) input.focus();
      }
    });
  }

  function wireBanner() {
    document.addEventListener("click", (event) => {
      if (event.target.closest(".banner-close")) {
        const banner = document.getElementById("banner");
        banner.classList.remove("banner-shown");
        banner.replaceChildren();
      }
    });
  }

  // The working indicator ("Thinking…"): its seconds count on from what the server
  // rendered (data-elapsed), by this page's own clock.
  function wireElapsed() {
    setInterval(() => {
      const el = document.querySelector("#live-status [data-elapsed]");
      if (!el) return;
      if (!el.dataset.seenAt) el.dataset.seenAt = String(Date.now());
      const seconds = Number(el.dataset.elapsed) + Math.floor((Date.now() - Number(el.dataset.seenAt)) / 1000);
      const label = `${seconds}s`;
      if (el.textContent !== label) el.textContent = label;
    }, 250);
  }

  // The tab's title follows the chat's heading, however a new title arrives (a rename's
  // answer, or the socket: a proposed title, a rename in another tab).
  function wireTabTitle() {
    const sync = () => {
      const heading = document.getElementById("chat-title");
      if (!heading) return;
      const title = `${heading.textContent.trim()} · Loopdesk`;
      if (document.title !== title) document.title = title;
    };
    document.body.addEventListener("htmx:oobAfterSwap", sync);
    document.body.addEventListener("htmx:afterSwap", sync);
    document.body.addEventListener("htmx:wsAfterMessage", sync);
  }

  function start() {
    watchChat();
    wireComposer();
    wireBanner();
    wireElapsed();
    wireTabTitle();
  }

  return { start, normalizeRows };
})();

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", Loopdesk.start);
} else {
  Loopdesk.start();
}
