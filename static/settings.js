// Settings and the empty chat: a live character count on textareas with a cap, and the
// suggested first requests leave once a chat has rows. No inline scripts: the CSP forbids
// them. Safe to load more than once.
"use strict";

(() => {
  if (window.LoopdeskSettings) return;
  window.LoopdeskSettings = true;

  const number = new Intl.NumberFormat("en");

  // <textarea data-char-limit="4000" data-char-count="<id of the counter>">
  function updateCount(textarea) {
    const counter = document.getElementById(textarea.dataset.charCount || "");
    const limit = Number(textarea.dataset.charLimit);
    if (!counter || !limit) return;
    const length = textarea.value.length;
    const over = length - limit;
    counter.textContent =
      `${number.format(length)} / ${number.format(limit)} characters` +
      (over > 0 ? `: ${number.format(over)} too many` : "");
    counter.classList.toggle("over", over > 0);
    if (over > 0) textarea.setAttribute("aria-invalid", "true");
    else textarea.removeAttribute("aria-invalid");
  }

  function updateAll(root) {
    for (const textarea of root.querySelectorAll("textarea[data-char-limit]")) updateCount(textarea);
  }

  document.addEventListener("input", (event) => {
    if (event.target.matches && event.target.matches("textarea[data-char-limit]")) {
      updateCount(event.target);
    }
  });

  // Suggested first requests (#starters) are for an empty chat only.
  function watchRows() {
    const rows = document.getElementById("rows");
    if (!rows) return;
    const check = () => {
      const starters = document.getElementById("starters");
      if (starters && rows.querySelector("[data-sequence]")) starters.remove();
    };
    new MutationObserver(check).observe(rows, { childList: true });
    check();
  }

  function start() {
    updateAll(document);
    watchRows();
    document.body.addEventListener("htmx:afterSettle", (event) => updateAll(event.detail.elt || document));
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
