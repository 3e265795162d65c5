// A preset's starter prompts (templates/chat/_preset_starters.html): a button fills the
// composer with its prompt, ready to edit or send. No inline scripts: the CSP forbids them.
"use strict";

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-fill-composer]");
  const box = document.getElementById("composer-input");
  if (!button || !box) return;
  box.value = button.dataset.fillComposer;
  // The composer keeps its draft on input (static/composer.js).
  box.dispatchEvent(new Event("input", { bubbles: true }));
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
});

// The presets section (templates/settings/_presets.html) is swapped whole: put the focus
// where the person goes on, never on the page's start. A refused form: its first field;
// a form opened for editing: its name; after a save or a delete: the section's heading.
document.addEventListener("htmx:afterSettle", (event) => {
  if (!event.detail.target || event.detail.target.id !== "presets") return;
  const presets = document.getElementById("presets");
  if (!presets) return;
  const refused = presets.querySelector(".preset-form [role=alert]");
  const editing = presets.querySelector(".preset .preset-form");
  const form = refused ? refused.closest("form") : editing;
  const next = form ? form.querySelector("input[name=name]") : document.getElementById("presets-heading");
  if (next) next.focus();
});
