// Small behaviours htmx does not cover. No inline scripts: the CSP forbids them.
"use strict";

const Loopdesk = (() => {
  // Rows are keyed by sequence: a row pushed twice replaces itself and rows stay ordered.
  function normalizeRows(container) {
    const seen = new Map();
    for (const row of Array.from(container.children)) {
      if (!row.id) continue;
      const earlier = seen.get(row.id);
      if (earlier) replaceKeepingFocus(earlier, row);
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

  // A row pushed again (its run's steps added, a catch-up after a reconnect) must not take
  // the person's place: what they chose or typed in it, and the focus, carry over.
  function replaceKeepingFocus(earlier, row) {
    const active = document.activeElement;
    const focusId = active && active.id && earlier.contains(active) ? active.id : null;
    for (const input of earlier.querySelectorAll("input[id], textarea[id]")) {
      const twin = row.querySelector(`#${CSS.escape(input.id)}`);
      if (!twin || twin.type !== input.type) continue;
      if (input.type === "radio" || input.type === "checkbox") twin.checked = input.checked;
      else if (input.type !== "hidden" && input.type !== "file") twin.value = input.value;
    }
    earlier.replaceWith(row);
    if (focusId) document.getElementById(focusId)?.focus();
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
      RowTimes.place(rows);
      observer.observe(rows, { childList: true });
      if (stick) chat.scrollTop = chat.scrollHeight;
    });
    RowTimes.place(rows);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState !== "visible") return;
      observer.disconnect();
      RowTimes.place(rows); // "Today" may have become "Yesterday"
      observer.observe(rows, { childList: true });
    });
    observer.observe(rows, { childList: true });
    new MutationObserver(() => { if (stick) chat.scrollTop = chat.scrollHeight; })
      .observe(chat, { childList: true, subtree: true, characterData: true });
    chat.scrollTop = chat.scrollHeight;

    // Every (re)connect: tell the server the last row we hold; having subscribed first,
    // it sends the rows persisted since, so nothing falls between fetch and subscribe.
    let socket = null;
    function catchUp() {
      // ...and the branch it shows, so a branch switch missed meanwhile is sent whole.
      const branch = document.getElementById("branch-state");
      socket.sendImmediately(JSON.stringify({
        after: lastSequence(rows), branch: branch ? branch.dataset.branch : undefined,
      }));
    }
    document.body.addEventListener("htmx:wsOpen", (event) => {
      socket = event.detail.socketWrapper;
      catchUp();
      document.body.dataset.socket = "open";
    });
    // A catch-up is sent a page of rows at a time: the server's #catch-up-more marker
    // says more follow, and the next page is asked for from the last row held.
    document.body.addEventListener("htmx:wsAfterMessage", () => {
      const more = document.getElementById("catch-up-more");
      if (!socket || !more || !more.dataset.after) return;
      delete more.dataset.after;
      catchUp();
    });
    document.body.addEventListener("htmx:wsClose", () => {
      document.body.dataset.socket = "closed";
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
    ConnectionState.wire();
    Toasts.wire();
    Theme.wire();
    Menus.wire();
    Announcer.wire();
    Sidebar.wire();
    wireElapsed();
    wireTabTitle();
    LiveText.wire();
    Copy.wire();
    SkipLinks.wire();
  }

  return { start, normalizeRows };
})();

// The socket's state, quietly (a polite status in the chat's header, never a modal): a
// drop that htmx will reconnect from says "Reconnecting…" once it has lasted two seconds
// (a blip says nothing), and the reconnect "Connected again", which then fades.
const ConnectionState = (() => {
  const DOWN_MS = 2000;
  const SHOWN_MS = 3000;
  const FADE_MS = 700;
  const reconnects = [1006, 1011, 1012, 1013]; // the close codes htmx reconnects after
  const POLICY_VIOLATION = 1008; // the server ended the access this socket had (docs/CONTRACT.md)
  const SESSION_ENDED = "Your session ended: log in again.";
  let downTimer = null;
  let endedShown = false;
  let checking = false;
  let fadeTimer = null;
  let said = false; // "Reconnecting…" was shown for this drop

  function show(text, state) {
    const region = document.getElementById("connection-state");
    if (!region) return;
    clearTimeout(fadeTimer);
    region.classList.remove("connection-down", "connection-back", "connection-fading");
    if (state) region.classList.add(state);
    if (region.textContent !== text) region.textContent = text;
  }

  // The chat was deleted (the socket's frame swapped the notice in): the notice instead of
  // the chat, whose socket this page then closes (htmx closes it with its element; a
  // close from the server could lose the frame); focus goes to the notice if it was in
  // what is now hidden.
  function chatGone() {
    const notice = document.getElementById("chat-deleted");
    if (!notice || document.body.classList.contains("chat-gone")) return;
    const active = document.activeElement;
    const lost = !active || active === document.body || Boolean(active.closest("#chat, #composer-area"));
    notice.hidden = false;
    document.body.classList.add("chat-gone");
    if (lost) document.getElementById("chat-deleted-title")?.focus();
    setTimeout(() => {
      const chat = document.getElementById("chat");
      if (chat && window.htmx) window.htmx.remove(chat);
    }, 0);
  }

  // The session ended (logged out in another tab, a new password...): nothing more will
  // come, so say so with a way back in, once.
  function sessionEnded(reason) {
    if (endedShown) return;
    endedShown = true;
    const next = encodeURIComponent(location.pathname + location.search);
    Toasts.error(reason || SESSION_ENDED, { href: `/login?next=${next}`, label: "Log in" });
    clearTimeout(downTimer);
    show("", null);
  }

  // A close without its reason (a proxy, or a connection cut before the close frame
  // arrived) may still be the session's end, or the chat's (deleted while this tab was
  // offline): ask at each such close (htmx's reconnects back off), for no rows (after
  // the last one shown).
  function checkSession() {
    if (checking || endedShown) return;
    checking = true;
    const socketUrl = document.querySelector("#chat[ws-connect]")?.getAttribute("ws-connect") || "";
    const chatId = (socketUrl.match(/\/ws\/chats\/(\d+)/) || [])[1];
    const shown = Array.from(document.querySelectorAll("#rows [data-sequence]"), (row) => Number(row.dataset.sequence));
    const url = chatId
      ? `/api/chats/${chatId}/messages?after=${Math.max(0, ...shown)}`
      : "/api/chats?limit=1";
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((answer) => {
        if (answer.status === 401) sessionEnded("");
        else if (answer.status === 404 && chatId) {
          document.getElementById(`conv-${chatId}`)?.remove();
          chatGone();
        }
      })
      .catch(() => { /* unreachable: the reconnect says so */ })
      .finally(() => { checking = false; });
  }

  function wire() {
    if (!document.getElementById("connection-state")) return;
    document.body.addEventListener("htmx:wsAfterMessage", () => {
      const notice = document.getElementById("chat-deleted");
      if (notice && !notice.hidden) chatGone();
    });
    document.body.addEventListener("htmx:wsClose", (event) => {
      const code = event.detail?.event?.code;
      clearTimeout(downTimer);
      if (!document.body.classList.contains("chat-gone")) {
        if (code === POLICY_VIOLATION) sessionEnded(event.detail.event.reason);
        else checkSession();
      }
      if (endedShown) return; // no "Reconnecting…": it would not
      if (document.body.classList.contains("chat-gone") || !reconnects.includes(code)) {
        show("", null);
        return;
      }
      downTimer = setTimeout(() => {
        said = true;
        show("Reconnecting…", "connection-down");
      }, DOWN_MS);
    });
    document.body.addEventListener("htmx:wsOpen", () => {
      checking = false;
      clearTimeout(downTimer);
      if (!said) return;
      said = false;
      show("Connected again", "connection-back");
      const region = document.getElementById("connection-state");
      fadeTimer = setTimeout(() => {
        region.classList.add("connection-fading");
        fadeTimer = setTimeout(() => show("", null), FADE_MS);
      }, SHOWN_MS);
    });
  }

  return { wire };
})();

// Row times and day separators. The server writes each row's UTC instant in a
// <time datetime> and separators by UTC day; here they show in the person's time zone, and
// separators are kept right as rows arrive live (one before the first row of each day).
const RowTimes = (() => {
  const timeFormat = { hour: "2-digit", minute: "2-digit" };
  const dayFormat = { weekday: "long", day: "numeric", month: "long", year: "numeric" };

  function dayKey(date) {
    const pad = (n) => String(n).padStart(2, "0");
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  }

  function dayLabel(key) {
    const today = new Date();
    const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
    if (key === dayKey(today)) return "Today";
    if (key === dayKey(yesterday)) return "Yesterday";
    const [y, m, d] = key.split("-").map(Number);
    return new Date(y, m - 1, d).toLocaleDateString(undefined, dayFormat);
  }

  function rowDay(row) {
    const time = row.querySelector(":scope > .row-meta > time.row-time");
    if (!time) return null;
    const date = new Date(time.dateTime);
    if (Number.isNaN(date.getTime())) return null;
    if (!time.dataset.local) {
      time.textContent = date.toLocaleTimeString(undefined, timeFormat);
      time.title = date.toLocaleString(undefined, { dateStyle: "full", timeStyle: "short" });
      time.dataset.local = "true";
    }
    return dayKey(date);
  }

  function separator(key) {
    const heading = document.createElement("h2");
    heading.className = "day-sep";
    heading.append(document.createElement("time"));
    label(heading, key);
    return heading;
  }

  function label(heading, key) {
    const time = heading.querySelector("time");
    const text = dayLabel(key);
    if (time.dateTime !== key) time.dateTime = key;
    if (time.textContent !== text) time.textContent = text;
  }

  function place(container) {
    let previous = null;
    let pending = null; // a separator met since the last row
    for (const el of Array.from(container.children)) {
      if (el.classList.contains("day-sep")) {
        if (pending) pending.remove();
        pending = el;
        continue;
      }
      if (!el.dataset.sequence) continue;
      const day = rowDay(el) || previous;
      if (day && day !== previous) {
        if (!pending) {
          pending = separator(day);
          el.before(pending);
        }
        label(pending, day);
      } else if (pending) {
        pending.remove();
      }
      pending = null;
      previous = day;
    }
    if (pending) pending.remove();
  }

  return { place };
})();

// The live segment arrives rendered, a few times a second: its tail is updated in place,
// so only what is new changes in the page (a screen reader hears the new words; focus and
// a selection in what was already there survive). The nodes come from the fragment htmx
// parsed from the server's sanitized HTML: nothing is parsed here.
const LiveText = (() => {
  function sameShell(a, b) {
    if (a.nodeType !== Node.ELEMENT_NODE || a.tagName !== b.tagName) return false;
    if (a.attributes.length !== b.attributes.length) return false;
    for (const attr of a.attributes) {
      if (b.getAttribute(attr.name) !== attr.value) return false;
    }
    return true;
  }

  function morph(into, from) {
    let node = into.firstChild;
    for (const incoming of Array.from(from.childNodes)) {
      if (incoming.nodeType === Node.TEXT_NODE) {
        // Text here may be several nodes: the pieces added by earlier updates.
        let have = "";
        const run = [];
        while (node && node.nodeType === Node.TEXT_NODE) {
          have += node.data;
          run.push(node);
          node = node.nextSibling;
        }
        if (run.length && incoming.data.startsWith(have)) {
          const added = incoming.data.slice(have.length);
          if (added) run[run.length - 1].after(document.createTextNode(added));
        } else {
          for (const old of run) old.remove();
          into.insertBefore(incoming, node);
        }
      } else if (incoming.nodeType === Node.ELEMENT_NODE && node && sameShell(node, incoming)) {
        morph(node, incoming);
        node = node.nextSibling;
      } else if (node) {
        const next = node.nextSibling;
        node.replaceWith(incoming);
        node = next;
      } else {
        into.append(incoming);
      }
    }
    while (node) {
      const next = node.nextSibling;
      node.remove();
      node = next;
    }
  }

  function wire() {
    document.body.addEventListener("htmx:oobBeforeSwap", (event) => {
      const { target, fragment } = event.detail;
      if (!target || target.id !== "live-md-tail" || !fragment) return;
      const incoming = fragment.firstElementChild;
      if (!incoming || incoming.id !== "live-md-tail") return;
      morph(target, incoming);
      event.detail.shouldSwap = false;
    });
  }

  return { wire, morph };
})();

// Copy buttons: a host message as Markdown (its source is in the row's <template>), a code
// block as its text, a secret shown once (a new token) as its text. Delegated, so rows and
// live text swapped in later work too.
const Copy = (() => {
  let status = null;

  function source(button) {
    if (button.dataset.copy === "text") {
      // <button data-copy="text" data-copy-of="<id>">: that element's text.
      const shown = document.getElementById(button.dataset.copyOf || "");
      return shown ? shown.textContent : null;
    }
    if (button.dataset.copy === "code") {
      const code = button.closest(".code-block")?.querySelector("pre > code");
      return code ? code.textContent : null;
    }
    if (button.dataset.copy === "answer") return answerText(button.closest(".row"));
    const template = button.closest(".row")?.querySelector(":scope > .row-meta > template.row-markdown");
    return template ? template.content.textContent : null;
  }

  // An answer: the rows from the person's message above to this one (the last shown). Its
  // host rows' Markdown, joined; an answer without any (an error, a notice) as it reads.
  function answerText(last) {
    const rows = [];
    for (let el = last; el && !el.classList.contains("row-user"); el = el.previousElementSibling) {
      if (el.matches("article.row")) rows.unshift(el);
    }
    const markdown = rows
      .map((row) => row.querySelector(":scope > .row-meta > template.row-markdown"))
      .filter(Boolean)
      .map((template) => template.content.textContent.trim());
    if (markdown.length) return markdown.join("\n\n");
    return rows.map((row) => row.querySelector(":scope > .row-body")?.innerText.trim() || "")
      .filter(Boolean).join("\n\n") || null;
  }

  async function write(text) {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return;
    }
    // Plain http off localhost has no clipboard API: the old way.
    const area = document.createElement("textarea");
    area.className = "copy-buffer";
    area.value = text;
    area.setAttribute("readonly", "");
    document.body.append(area);
    area.select();
    const copied = document.execCommand("copy");
    area.remove();
    if (!copied) throw new Error("copy refused");
  }

  function confirm(button, text) {
    clearTimeout(button.copyTimer);
    button.textContent = text;
    button.classList.add("copied");
    status.textContent = "";
    status.textContent = text === "Copied" ? `Copied: ${button.getAttribute("aria-label").replace(/^Copy /, "")}` : text;
    button.copyTimer = setTimeout(() => {
      button.textContent = "Copy";
      button.classList.remove("copied");
    }, 2000);
  }

  function wire() {
    status = document.createElement("div");
    status.id = "copy-status";
    status.className = "visually-hidden";
    status.setAttribute("role", "status");
    document.body.append(status);
    document.addEventListener("click", async (event) => {
      const button = event.target.closest("button[data-copy]");
      if (!button) return;
      const text = source(button);
      if (text === null) return;
      try {
        await write(text);
        confirm(button, "Copied");
      } catch {
        confirm(button, "Copy failed");
      }
    });
  }

  return { wire };
})();

// The first Tab on a page reaches the skip links, also when a script put the focus
// somewhere as the page loaded (the message box, a waiting card), as long as the person
// has done nothing else yet.
const SkipLinks = (() => {
  function wire() {
    let untouched = true;
    // A click, or text put into a field (typed, pasted, dictated), means the person is at
    // work where they are: their Tab goes on from there.
    document.addEventListener("pointerdown", () => { untouched = false; }, true);
    document.addEventListener("input", () => { untouched = false; }, true);
    document.addEventListener("keydown", (event) => {
      if (!untouched) return;
      untouched = false;
      if (event.key !== "Tab" || event.shiftKey || event.altKey || event.ctrlKey || event.metaKey) return;
      const first = document.querySelector(".skip-link");
      const active = document.activeElement;
      if (!first || !active || active === document.body || active === first) return;
      event.preventDefault();
      first.focus();
    }, true);
  }

  return { wire };
})();

// Toasts: the banner (#banner, role=alert) says what went wrong, #toast (role=status) what
// came back. Both float over the page, so they never push the composer; a person's next
// request that succeeds clears an old banner (background polls do not).
const Toasts = (() => {
  let infoTimer = null;

  // `link` ({href, label}): a way on, after the message.
  function error(message, link) {
    const banner = document.getElementById("banner");
    if (!banner) return;
    const text = document.createElement("span");
    text.textContent = message;
    const parts = [text];
    if (link) {
      const a = document.createElement("a");
      a.href = link.href;
      a.textContent = link.label;
      a.className = "banner-link";
      parts.push(document.createTextNode(" "), a);
    }
    const close = document.createElement("button");
    close.type = "button";
    close.className = "link banner-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    banner.replaceChildren(...parts, close);
    banner.setAttribute("role", "alert");
    banner.classList.add("banner-shown");
  }

  function clear() {
    const banner = document.getElementById("banner");
    if (!banner || !banner.classList.contains("banner-shown")) return;
    banner.classList.remove("banner-shown");
    banner.replaceChildren();
  }

  // Clear the banner only if it still says `message` (a newer error stays).
  function clearError(message) {
    const banner = document.getElementById("banner");
    if (banner && banner.textContent.includes(message)) clear();
  }

  function info(message) {
    const toast = document.getElementById("toast");
    if (!toast) return;
    toast.textContent = message;
    clearTimeout(infoTimer);
    infoTimer = setTimeout(() => { toast.textContent = ""; }, 6000);
  }

  function wire() {
    document.addEventListener("click", (event) => {
      if (event.target.closest(".banner-close")) clear();
    });
    document.body.addEventListener("htmx:beforeSwap", (event) => {
      const { xhr, elt } = event.detail;
      if (!xhr || xhr.status >= 400 || event.detail.isError) return;
      if (elt && elt.closest && elt.closest("[hx-trigger*=every], [hx-trigger*=load]")) return;
      clear();
    });
  }

  return { wire, error, info, clear, clearError };
})();

// The colour theme: the system's until the person flips the toggle; the choice is saved
// on their account (POST /settings/theme) and the page changes at once.
const Theme = (() => {
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  const shown = () => document.documentElement.dataset.theme || (dark.matches ? "dark" : "light");

  function reflect(button) {
    const isDark = shown() === "dark";
    button.setAttribute("aria-pressed", String(isDark));
    button.value = isDark ? "light" : "dark";
  }

  function wire() {
    const button = document.getElementById("theme-toggle");
    if (!button) return;
    reflect(button);
    dark.addEventListener("change", () => reflect(button));
    button.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const next = shown() === "dark" ? "light" : "dark";
      document.documentElement.dataset.theme = next;
      reflect(button);
      const body = new FormData(button.form);
      body.set("theme", next);
      try {
        const response = await fetch(button.form.action, {
          method: "POST", body, credentials: "same-origin", headers: { "X-Requested-With": "fetch" },
        });
        if (!response.ok) throw new Error(String(response.status));
      } catch {
        Toasts.error("The theme could not be saved: it is back to what it was on your next visit.");
      }
    });
  }

  return { wire };
})();

// The top menu (a menu button on narrow screens) and the chat list's drawer on a phone.
// Esc closes either and gives focus back to the button that opened it.
const Menus = (() => {
  function setMenu(open, focusButton) {
    const button = document.getElementById("menu-button");
    const nav = document.getElementById("topnav");
    if (!button || !nav) return;
    nav.classList.toggle("open", open);
    button.setAttribute("aria-expanded", String(open));
    if (open) nav.querySelector("a, button")?.focus();
    else if (focusButton) button.focus();
  }

  function setDrawer(open, focusButton) {
    const sidebar = document.getElementById("sidebar");
    const opener = document.querySelector("[data-drawer-open]");
    if (!sidebar) return;
    document.body.classList.toggle("drawer-open", open);
    opener?.setAttribute("aria-expanded", String(open));
    if (open) {
      (sidebar.querySelector("[aria-current=page]") || sidebar.querySelector("a, button"))?.focus();
    } else if (focusButton) {
      opener?.focus();
    }
  }

  const menuOpen = () => document.getElementById("topnav")?.classList.contains("open");
  const drawerOpen = () => document.body.classList.contains("drawer-open");

  function wire() {
    document.addEventListener("click", (event) => {
      if (event.target.closest("#menu-button")) {
        setMenu(!menuOpen(), false);
      } else if (event.target.closest("[data-drawer-open]")) {
        setDrawer(true, false);
      } else if (event.target.closest("[data-drawer-close]")) {
        setDrawer(false, true);
      } else if (menuOpen() && !event.target.closest("#topnav")) {
        setMenu(false, false);
      }
    });
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      if (menuOpen()) {
        event.preventDefault();
        setMenu(false, true);
      } else if (drawerOpen()) {
        event.preventDefault();
        setDrawer(false, true);
      } else {
        // A header menu (Export, Share) holding the focus closes, and its button keeps it.
        const open =
          event.target.closest?.("details.chat-export[open]") ||
          (event.target === document.body && document.querySelector("details.chat-export[open]"));
        if (!open) return;
        event.preventDefault();
        open.open = false;
        open.querySelector("summary")?.focus();
      }
    });
    // Tabbing out of the open menu closes it.
    document.addEventListener("focusin", (event) => {
      if (menuOpen() && !event.target.closest("#topnav, #menu-button")) setMenu(false, false);
    });
  }

  return { wire };
})();

// The chat list's groups (pinned, folders, recent) and its Select mode. An item the socket
// pushes that belongs in another group (pinned, filed or archived in another tab), or one
// the list does not hold (restored elsewhere), has the list fetched again; "Select" shows
// a checkbox on every item and the bulk actions (which ask before they act).
const Sidebar = (() => {
  function refresh() {
    const list = document.getElementById("conversation-list");
    // Not while the person is in the middle of something there (a rename, a Move, a
    // selection): its own answer brings the whole list.
    if (!list || !list.dataset.src || busy(list)) return;
    htmx.ajax("GET", list.dataset.src, { target: list, swap: "outerHTML" });
  }

  const busy = (list) => Boolean(list.querySelector(".editing")) || list.classList.contains("selecting");

  function isItem(el) {
    return el instanceof Element && el.classList.contains("conversation-item") && el.dataset.group;
  }

  // Where the focus is in the list: an item's id and which of its controls. The list is
  // re-rendered by an item's action, by the socket's item and by a refresh; each time the
  // focus goes back to the same place (Pin becomes Unpin there), or to the list when the
  // chat left it.
  const controls = (item) => Array.from(item.querySelectorAll("a, button, input:not([type=hidden])"));
  let memo = null;

  function remember(element) {
    const item = element instanceof Element ? element.closest(".conversation-item") : null;
    if (item && item.id) memo = { id: item.id, index: controls(item).indexOf(element) };
  }

  function restore(loaded) {
    if (!memo || !(loaded.id === "conversation-list" || loaded.id === memo.id)) return;
    const item = document.getElementById(memo.id);
    const list = document.getElementById("conversation-list");
    let target = item ? controls(item)[memo.index] || controls(item)[0] : list && list.querySelector("a, button");
    if (item && item.classList.contains("editing")) target = item.querySelector("input:not([type=hidden])");
    // With a mouse the item's actions show only while it holds the focus (app.css): its
    // link takes it first, so the action is focusable.
    if (item && target && target.closest(".item-actions")) item.querySelector("a")?.focus();
    if (target) target.focus();
    if (loaded.id === "conversation-list") memo = null;
  }

  function wire() {
    document.body.addEventListener("htmx:beforeRequest", (event) => {
      if (event.target instanceof Element && event.target.closest(".conversation-item")) remember(event.target);
    });
    document.body.addEventListener("htmx:beforeSwap", (event) => {
      const target = event.detail && event.detail.target;
      if (!target || target.id !== "conversation-list") return;
      const config = event.detail.requestConfig || {};
      if (config.verb === "get" && busy(target)) {
        event.detail.shouldSwap = false; // a refresh that came back while the person acts
        return;
      }
      if (target.contains(document.activeElement)) remember(document.activeElement);
    });
    document.body.addEventListener("htmx:oobBeforeSwap", (event) => {
      const old = event.detail && event.detail.target;
      if (old instanceof Element && old.contains(document.activeElement)) remember(document.activeElement);
    });
    // (htmx:load: the new list or item, in the page; an outerHTML swap's settle events
    // fire on the element it replaced, out of the page.)
    document.body.addEventListener("htmx:load", (event) => {
      restore(event.target);
      const item = event.target;
      if (!isItem(item)) return;
      const group = item.parentElement && item.parentElement.closest("[data-group]");
      if (group && group.dataset.group !== item.dataset.group) refresh();
    });
    document.body.addEventListener("htmx:oobErrorNoTarget", (event) => {
      const item = event.detail && event.detail.content;
      if (isItem(item) && item.dataset.group !== "archived" && item.id.startsWith("conv-")) refresh();
    });
    document.addEventListener("click", (event) => {
      const toggle = event.target.closest("[data-select-toggle]");
      if (!toggle) return;
      const area = toggle.closest("#conversation-list, #archived-list");
      const on = toggle.getAttribute("aria-pressed") !== "true";
      toggle.setAttribute("aria-pressed", String(on));
      toggle.textContent = on ? "Done selecting" : "Select";
      area.classList.toggle("selecting", on);
      if (!on) for (const box of area.querySelectorAll(".select-box")) box.checked = false;
    });
  }

  return { wire };
})();

// New answers are announced politely to a screen reader (once each, and not the rows a
// branch switch re-renders): a host message, a question card, a saved output, an error.
const Announcer = (() => {
  const kinds = ".row-host, .row-card, .row-agent_output, .row-error";
  let announced = 0;
  let region = null;

  function say(row) {
    const title = row.querySelector(".card-title");
    const body = row.querySelector(".row-body, .agent-output");
    let text = title ? `Loopdesk asks: ${title.textContent.trim()}` : `Loopdesk: ${(body?.textContent || "").trim()}`;
    if (text.length > 300) text = `${text.slice(0, 299)}…`;
    region.textContent = text;
  }

  function wire() {
    const rows = document.getElementById("rows");
    if (!rows) return;
    region = document.createElement("div");
    region.id = "row-announcer";
    region.className = "visually-hidden";
    region.setAttribute("aria-live", "polite");
    document.body.append(region);
    for (const row of rows.querySelectorAll("[data-sequence]")) {
      announced = Math.max(announced, Number(row.dataset.sequence));
    }
    new MutationObserver(() => {
      for (const row of rows.querySelectorAll(kinds)) {
        const sequence = Number(row.dataset.sequence);
        if (sequence > announced) {
          announced = sequence;
          say(row);
        }
      }
    }).observe(rows, { childList: true });
  }

  return { wire };
})();

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", Loopdesk.start);
} else {
  Loopdesk.start();
}
