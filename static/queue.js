// Unread chats and notifications (app/chat/unread.py). The chat list's items come again
// over the person's sockets when a run ends anywhere (the `conversation` frames of
// app/web/sockets.py): an item that turns unread gets its dot from the server. Here:
// the chat shown is marked read while the tab is visible; the "Unread" heading counts
// the dots per project; and, once the person allowed it with the "Notify me" button
// (never an unprompted prompt), a chat that turns unread while they look elsewhere shows
// a browser notification. No inline scripts: the CSP forbids them.
"use strict";

const Unread = (() => {
  let known = null; // the ids of the chats unread, as the list last showed them
  let reading = new Set(); // chats whose read is on its way

  const csrf = () => {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch { return ""; }
  };
  // An unread chat's item: its link carries data-unread (and its project and title).
  const unreadItems = () => Array.from(document.querySelectorAll(".conversation-item.unread"));
  const linkOf = (item) => item.querySelector("a[data-project]") || { dataset: {} };
  const visible = () => document.visibilityState === "visible";
  const notifying = () => "Notification" in window && Notification.permission === "granted";

  // The chat shown, unread and looked at: read (the server tells every tab).
  function readShown() {
    const shown = document.querySelector(".conversation-item.current.unread");
    if (!shown || !visible()) return;
    const id = shown.id.replace("conv-", "");
    if (reading.has(id)) return;
    reading.add(id);
    fetch(`/api/chats/${id}/read`, {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrf() },
    }).catch(() => {}).finally(() => reading.delete(id));
  }

  function count() {
    const summary = document.getElementById("unread-summary");
    if (!summary) return;
    const byProject = {};
    for (const item of unreadItems()) {
      const project = linkOf(item).dataset.project;
      byProject[project] = (byProject[project] || 0) + 1;
    }
    // Written only when they differ: the list's observer sees these changes too.
    const show = (element, text, hidden) => {
      const counter = element.querySelector("[data-count], [data-unread-total]");
      if (counter && counter.textContent !== text) counter.textContent = text;
      if (element.hidden !== hidden) element.hidden = hidden;
    };
    let total = 0;
    for (const line of summary.querySelectorAll("[data-unread-project]")) {
      const n = byProject[line.dataset.unreadProject] || 0;
      total += n;
      show(line, String(n), n === 0);
    }
    show(summary, String(total), total === 0);
  }

  function notify(item) {
    if (!notifying()) return;
    if (item.classList.contains("current") && visible()) return; // they are looking at it
    const link = item.querySelector("a");
    const title = linkOf(item).dataset.title || "A chat";
    const note = new Notification("Loopdesk: a reply is ready", { body: title, tag: `loopdesk-chat-${item.id}` });
    note.onclick = () => { window.focus(); if (link) location.href = link.href; };
  }

  function changed() {
    const now = new Set(unreadItems().map((item) => item.id));
    if (known) {
      for (const item of unreadItems()) if (!known.has(item.id)) notify(item);
    }
    known = now;
    count();
    readShown();
  }

  function wireButton() {
    const button = document.getElementById("notify-button");
    if (!button || !("Notification" in window)) return;
    const show = () => {
      button.hidden = Notification.permission !== "default";
      const state = document.getElementById("notify-state");
      if (state) state.textContent = Notification.permission === "granted" ? "Notifications on: you hear when a reply is ready in another chat." : "";
    };
    button.addEventListener("click", async () => {
      try { await Notification.requestPermission(); } catch { /* an old browser: no promise */ }
      show();
    });
    show();
  }

  function wire() {
    const list = document.getElementById("sidebar");
    if (!list) return;
    // The chat list's items (swapped by the socket's frames, or the list fetched again).
    new MutationObserver((records) => {
      if (records.some((record) => !record.target.closest || !record.target.closest("#unread-summary"))) changed();
    }).observe(list, { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });
    document.addEventListener("visibilitychange", readShown);
    wireButton();
    changed();
  }

  return { wire };
})();

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", Unread.wire);
} else {
  Unread.wire();
}
