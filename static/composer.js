// The composer. One message box lives for the page's life: a new composer from the server
// (this tab's send, the socket's busy/idle, another tab's send) has its buttons and state
// patched around the box, so what is being typed, the focus and the selection survive.
// Its mode (data-state: idle, answering, card) is the server's alone: every composer the
// server sends carries the run's state with a version (data-version), and one older than
// the composer shown is dropped (a late frame never brings Stop back). What this tab does
// (Esc, Stop) only shows a pending hint until the server's next composer replaces it.
// The draft is kept per chat in localStorage across reloads. Esc stops a run; files come
// by the attach button, a drop or a paste; a send that cannot go says so and keeps the
// draft. No inline scripts: the CSP forbids them.
"use strict";

const Composer = (() => {
  const notSentOffline = "Not sent: the connection to Loopdesk is down. Your message is kept here; send it again when the connection is back.";
  const notSentUnreachable = "Not sent: Loopdesk could not be reached. Your message is kept here; try again in a moment.";
  const waitForReply = "Wait for the reply to finish before sending (Esc stops it). Your message is kept.";
  let socketWasDown = false;

  const form = () => document.getElementById("composer");
  const box = () => document.getElementById("composer-input");
  const storeKey = () => `loopdesk:draft:${form()?.dataset.draftKey || "none"}`;
  const isBusy = () => Boolean(form()?.classList.contains("busy"));
  const socketDown = () => Boolean(document.getElementById("chat")) && document.body.dataset.socket === "closed";

  // -- drafts -----------------------------------------------------------------------------
  function stored() {
    try { return localStorage.getItem(storeKey()) || ""; } catch { return ""; }
  }

  function save() {
    const input = box();
    if (!input) return;
    try {
      if (input.value) localStorage.setItem(storeKey(), input.value);
      else localStorage.removeItem(storeKey());
    } catch { /* storage full or off: the box still holds the draft */ }
  }

  // Forget the draft only if it is what was sent: another tab's draft of the same chat
  // (written since) stays.
  function forget(sent) {
    try {
      if (stored() === sent) localStorage.removeItem(storeKey());
    } catch { /* nothing kept */ }
  }

  // -- the box kept across swaps ----------------------------------------------------------
  const versionOf = (element) => {
    const value = Number(element.dataset.version);
    return Number.isFinite(value) ? value : -1;
  };

  function patch(current, incoming) {
    // An older state than the one shown is stale: what it says has been left since.
    if (versionOf(incoming) < versionOf(current)) return true;
    const input = current.querySelector("#composer-input");
    const fresh = incoming.querySelector("#composer-input");
    if (!input || !fresh) return false;
    const hadFocus = current.contains(document.activeElement);
    for (const attr of Array.from(current.attributes)) {
      if (!incoming.hasAttribute(attr.name)) current.removeAttribute(attr.name);
    }
    for (const attr of Array.from(incoming.attributes)) {
      if (attr.name !== "hx-swap-oob" && current.getAttribute(attr.name) !== attr.value) {
        current.setAttribute(attr.name, attr.value);
      }
    }
    input.placeholder = fresh.placeholder;
    if (!input.value && fresh.value) input.value = fresh.value; // a draft the server kept
    // Everything but the box is replaced; the box is never moved (moving blurs it).
    const nodes = Array.from(incoming.childNodes);
    const at = nodes.indexOf(fresh);
    for (const child of Array.from(current.childNodes)) {
      if (child !== input) child.remove();
    }
    input.before(...nodes.slice(0, at));
    input.after(...nodes.slice(at + 1));
    if (window.htmx) window.htmx.process(current);
    if (hadFocus && !current.contains(document.activeElement)) input.focus();
    // What this tab holds is written again (another tab's send may have forgotten the
    // shared key); an empty box here never erases a draft another tab kept.
    if (input.value) save();
    return true;
  }

  function refuse(message) {
    Toasts.error(message);
    box()?.focus();
  }

  function wire() {
    const input = box();
    if (!input) return;
    if (!input.value && stored()) input.value = stored();
    // A chat opened with a mouse and keyboard starts in the box (a phone would pop its
    // keyboard up, so not there); a waiting card takes focus itself (card.js).
    if (window.matchMedia("(pointer: fine)").matches && document.activeElement === document.body && !location.hash) {
      input.focus();
    }

    document.addEventListener("input", (event) => {
      if (event.target.id === "composer-input") save();
    });

    document.body.addEventListener("htmx:oobBeforeSwap", (event) => {
      const { target, fragment } = event.detail;
      if (!target || target.id !== "composer" || !fragment) return;
      const incoming = fragment.firstElementChild;
      if (incoming && incoming.id === "composer" && patch(target, incoming)) {
        event.detail.shouldSwap = false;
      }
    });

    document.addEventListener("keydown", (event) => {
      if (event.target.id !== "composer-input" || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
      event.preventDefault();
      if (!event.target.value.trim()) return;
      // While a reply is written, Enter queues the message (the Queue button).
      const queue = form().querySelector("[data-send=queue]");
      if (isBusy() && queue) queue.click();
      else if (isBusy()) refuse(waitForReply);
      else event.target.form.requestSubmit();
    });

    // Esc stops a run (unless Esc is closing something else: an editor, the menu).
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || event.defaultPrevented || !isBusy()) return;
      if (event.target.closest && event.target.closest(".row-edit-form, dialog")) return;
      const stop = form().querySelector("button.stop");
      if (!stop) return;
      event.preventDefault();
      stop.click();
      box()?.focus();
    });

    // A stop asked for: a hint until the server answers with the run's state (its answer
    // and the socket's frames replace the whole composer, the hint with it).
    document.body.addEventListener("htmx:beforeRequest", (event) => {
      const stop = event.detail.elt;
      if (!stop || !stop.matches || !stop.matches("#composer button.stop")) return;
      form().dataset.pending = "stop";
      stop.textContent = "Stopping…";
    });
    document.body.addEventListener("htmx:afterRequest", (event) => {
      const stop = event.detail.elt;
      if (!stop || !stop.matches || !stop.matches("button.stop") || event.detail.successful) return;
      // Not answered (the connection failed): the hint goes; the socket says the rest.
      if (form()?.dataset.pending === "stop") {
        delete form().dataset.pending;
        if (form().contains(stop)) stop.textContent = "Stop";
      }
    });

    // The form's Send, and its Queue and Steer (buttons of their own, while busy).
    const sends = (elt) => elt === form() || Boolean(elt && elt.matches && elt.matches("#composer [data-send]"));
    document.body.addEventListener("htmx:beforeRequest", (event) => {
      if (!sends(event.detail.elt)) return;
      if (socketDown()) {
        event.preventDefault();
        socketWasDown = true;
        refuse(notSentOffline);
        return;
      }
      // Its end is read from the request itself: a Queue button swapped out by the run's
      // frames meanwhile gets no htmx:afterRequest that reaches the document.
      const sent = box()?.value ?? null;
      const { xhr } = event.detail;
      if (sent !== null && xhr) xhr.addEventListener("loadend", () => answered(sent, xhr.status));
    });
    // A send the server took (a 2xx, or a draft's HX-Redirect to its new chat): the box
    // empties if it still holds what was sent.
    function answered(sent, status) {
      if (status < 200 || status >= 400) return;
      const input = box();
      if (input && input.value === sent) input.value = "";
      forget(sent);
      if (input && (document.activeElement === document.body || form().contains(document.activeElement))) input.focus();
    }
    document.body.addEventListener("htmx:sendError", (event) => {
      if (sends(event.detail.elt)) refuse(notSentUnreachable);
    });

    // The header says when the socket drops and comes back (app.js); the toast only
    // follows a send that was refused meanwhile.
    document.body.addEventListener("htmx:wsOpen", () => {
      if (!socketWasDown) return;
      socketWasDown = false;
      Toasts.clearError(notSentOffline);
      Toasts.info("Connected again: you can send now.");
    });
    wireFiles();
  }

  // -- files: the attach button, a drop, a paste ------------------------------------------
  function upload(files) {
    const picker = document.getElementById("attach-input");
    if (!picker || !files.length) return;
    const transfer = new DataTransfer();
    for (const file of files) transfer.items.add(file);
    picker.files = transfer.files;
    picker.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function wireFiles() {
    const area = document.querySelector("[data-drop-files]");
    const picker = document.getElementById("attach-input");
    if (!area || !picker) return;
    document.addEventListener("click", (event) => {
      if (event.target.closest("[data-attach]")) picker.click();
    });
    area.addEventListener("dragover", (event) => {
      if (!event.dataTransfer || !Array.from(event.dataTransfer.types).includes("Files")) return;
      event.preventDefault();
      area.classList.add("dragging");
    });
    area.addEventListener("dragleave", (event) => {
      if (!area.contains(event.relatedTarget)) area.classList.remove("dragging");
    });
    area.addEventListener("drop", (event) => {
      area.classList.remove("dragging");
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      upload(Array.from(event.dataTransfer.files));
    });
    document.addEventListener("paste", (event) => {
      if (event.target.id !== "composer-input") return;
      const files = Array.from(event.clipboardData?.files || []);
      if (!files.length) return; // plain text pastes as usual
      event.preventDefault();
      upload(files);
    });
    document.body.addEventListener("htmx:afterRequest", (event) => {
      if (event.detail.elt === picker.form) picker.value = "";
    });
    // A removed chip takes its button away: focus goes back to the message box.
    document.body.addEventListener("htmx:afterSwap", (event) => {
      if (event.detail.target.id === "attachments" || event.detail.elt?.id === "attachments") {
        if (document.activeElement === document.body || !document.activeElement) box()?.focus();
      }
    });
    // A message sent (here or in another tab) takes its files: their chips go.
    const rows = document.getElementById("rows");
    if (rows) {
      new MutationObserver(() => {
        for (const file of rows.querySelectorAll(".row-file[data-attachment]")) {
          document.getElementById(`attachment-${file.dataset.attachment}`)?.remove();
        }
      }).observe(rows, { childList: true });
    }
  }

  return { wire };
})();

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", Composer.wire);
} else {
  Composer.wire();
}
