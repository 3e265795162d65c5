// The Schedule panel (templates/chat/_schedules.html): a time zone left empty is the
// browser's own (the server takes an empty one as UTC), also in a panel htmx swaps in.
(() => {
  const fill = (root) => {
    let zone = "";
    try {
      zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch {
      return;
    }
    for (const input of root.querySelectorAll?.("input[data-browser-zone]") || []) {
      if (!input.value && zone) input.value = zone;
    }
  };
  document.addEventListener("DOMContentLoaded", () => fill(document));
  document.addEventListener("htmx:load", (event) => fill(event.target));
})();
