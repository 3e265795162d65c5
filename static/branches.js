// Branches of a conversation (regenerate and edit): the pager keeps keyboard focus across
// the re-render a switch causes, and the person's messages are edited in place (Enter or
// Save sends, Shift+Enter adds a line, Esc cancels). No inline scripts: the CSP forbids them.
"use strict";

const LoopdeskBranches = (() => {
  let refocus = null; // {versions, dir}: the pager button pressed, until the rows re-render

  function restoreFocus() {
    if (!refocus) return;
    // Every row of an answer carries its pager; the one shown is the last row's.
    const pager = Array.from(document.querySelectorAll(".branch-pager"))
      .find((el) => el.dataset.versions === refocus.versions && el.getClientRects().length > 0);
    if (!pager) return;
    const buttons = Array.from(pager.querySelectorAll("button.branch-step"));
    const wanted = buttons.find((b) => b.dataset.dir === refocus.dir && !b.disabled)
      || buttons.find((b) => !b.disabled);
    if (wanted) wanted.focus();
    refocus = null;
  }

  function openEditor(button) {
    const row = button.closest("article.row");
    const body = row && row.querySelector(".row-body");
    if (!row || !body || row.querySelector(".row-edit-form")) return;
    const form = document.createElement("form");
    form.className = "row-edit-form";
    form.setAttribute("hx-post", button.dataset.editUrl);
    form.setAttribute("hx-swap", "none");
    const sequence = document.createElement("input");
    sequence.type = "hidden";
    sequence.name = "sequence";
    sequence.value = button.dataset.sequence;
    const label = document.createElement("label");
    label.className = "visually-hidden";
    label.htmlFor = `edit-${button.dataset.sequence}`;
    label.textContent = "Edit your message";
    const input = document.createElement("textarea");
    input.id = `edit-${button.dataset.sequence}`;
    input.name = "message";
    input.rows = 3;
    input.required = true;
    input.value = body.textContent;
    const actions = document.createElement("div");
    actions.className = "row-edit-actions";
    const save = document.createElement("button");
    save.type = "submit";
    save.className = "primary";
    save.textContent = "Save";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "row-edit-cancel";
    cancel.textContent = "Cancel";
    actions.append(save, cancel);
    form.append(sequence, label, input, actions);
    body.hidden = true;
    button.hidden = true;
    body.after(form);
    if (window.htmx) window.htmx.process(form);
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  function closeEditor(form) {
    const row = form.closest("article.row");
    form.remove();
    if (!row) return;
    const body = row.querySelector(".row-body");
    const edit = row.querySelector(".row-edit");
    if (body) body.hidden = false;
    if (edit) {
      edit.hidden = false;
      edit.focus();
    }
  }

  function start() {
    document.addEventListener("click", (event) => {
      const step = event.target.closest(".branch-step");
      if (step) {
        const pager = step.closest(".branch-pager");
        refocus = { versions: pager.dataset.versions, dir: step.dataset.dir };
        return;
      }
      const edit = event.target.closest(".row-edit");
      if (edit) {
        openEditor(edit);
        return;
      }
      const cancel = event.target.closest(".row-edit-cancel");
      if (cancel) closeEditor(cancel.closest(".row-edit-form"));
    });
    document.addEventListener("keydown", (event) => {
      const form = event.target.closest && event.target.closest(".row-edit-form");
      if (!form || event.target.tagName !== "TEXTAREA" || event.isComposing) return;
      if (event.key === "Escape") {
        event.preventDefault();
        closeEditor(form);
      } else if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        if (event.target.value.trim()) form.requestSubmit();
      }
    });
    const rows = document.getElementById("rows");
    if (rows) new MutationObserver(restoreFocus).observe(rows, { childList: true });
  }

  return { start };
})();

if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", LoopdeskBranches.start);
} else {
  LoopdeskBranches.start();
}
