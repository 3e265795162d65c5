// A search hit opens its chat at the row (#m-<sequence>): the chat page otherwise starts
// at the bottom, so bring the row into view once the page has settled, mark it, and move
// focus there for keyboard and screen-reader users.
(function () {
  "use strict";

  function revealLinkedRow() {
    const match = /^#m-(\d+)$/.exec(window.location.hash);
    const chat = document.getElementById("chat");
    if (!match || !chat) return;
    const row = document.getElementById("m-" + match[1]);
    if (!row) return;
    row.classList.add("row-found");
    row.setAttribute("tabindex", "-1");
    const reveal = () => row.scrollIntoView({ block: "center" });
    reveal();
    row.focus({ preventScroll: true });
    // The socket's catch-up may append rows and re-stick the view to the bottom.
    window.setTimeout(reveal, 400);
  }

  document.addEventListener("DOMContentLoaded", revealLinkedRow);
  window.addEventListener("hashchange", revealLinkedRow);
})();
