// Workspace pages: "Copy" buttons on a saved output. No inline scripts: the CSP forbids them.
// A button names the textarea holding the text to copy (data-copy-target) and, optionally,
// a status element to report in (data-copy-status). The server fills the textareas.
"use strict";

(() => {
  function say(button, message) {
    const status = document.getElementById(button.dataset.copyStatus || "");
    if (status) status.textContent = message;
  }

  // No clipboard API (an http page, an old browser, a refused permission): show the text
  // selected, so the person can copy it with the keyboard.
  function selectForCopy(source) {
    source.classList.remove("visually-hidden");
    source.classList.add("copy-revealed");
    source.removeAttribute("tabindex");
    source.focus();
    source.select();
    try {
      return document.execCommand("copy");
    } catch {
      return false;
    }
  }

  async function copy(button) {
    const source = document.getElementById(button.dataset.copyTarget || "");
    if (!source) return;
    const text = source.value;
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(text);
        say(button, "Copied.");
        return;
      } catch {
        // Fall through to selecting the text.
      }
    }
    say(button, selectForCopy(source) ? "Copied." : "Selected: press Ctrl+C (⌘C on a Mac) to copy.");
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-copy-target]");
    if (!button) return;
    event.preventDefault();
    copy(button);
  });
})();
