// Optional drag-and-drop reordering of the pins board; the up/down buttons do the same
// without JavaScript. Posts the new order through htmx (so the CSRF header is sent).
(function () {
  let dragged = null;
  document.addEventListener("dragstart", (event) => {
    const row = event.target.closest && event.target.closest("tr[draggable=true]");
    if (!row) return;
    dragged = row;
    row.classList.add("dragging");
    event.dataTransfer.effectAllowed = "move";
  });
  document.addEventListener("dragover", (event) => {
    const row = event.target.closest && event.target.closest("tr[draggable=true]");
    if (!dragged || !row || row === dragged || row.parentNode !== dragged.parentNode) return;
    event.preventDefault();
    const after = event.clientY > row.getBoundingClientRect().top + row.offsetHeight / 2;
    row.parentNode.insertBefore(dragged, after ? row.nextSibling : row);
  });
  document.addEventListener("dragend", () => {
    if (!dragged) return;
    const board = dragged.closest("[data-reorder-url]");
    dragged.classList.remove("dragging");
    dragged = null;
    if (!board || !window.htmx) return;
    const order = Array.from(board.querySelectorAll("tr[data-fragment]"), (r) => r.dataset.fragment);
    htmx.ajax("POST", board.dataset.reorderUrl, {
      source: board, target: "#pins-board", swap: "outerHTML", values: { order: order.join(",") },
    });
  });
})();

// An HTMX request that fails (403, 400, 500…) swaps nothing; say so instead of staying silent.
document.addEventListener("htmx:responseError", (event) => {
  const xhr = event.detail.xhr;
  let box = document.getElementById("console-alert");
  if (!box) {
    box = document.createElement("p");
    box.id = "console-alert";
    box.className = "notice error";
    box.setAttribute("role", "alert");
    document.getElementById("main").prepend(box);
  }
  const reason = xhr.status === 403 ? "you may not do that here" :
    (xhr.status === 400 && xhr.responseText.length < 300 ? xhr.responseText : `error ${xhr.status}`);
  box.textContent = `That did not work: ${reason}.`;
});

// The "New fragment" form: a negative context is written as don't / do instead / why, every
// other kind as a body. Without JavaScript both groups show, each saying which kind it is for.
(function () {
  function sync(form) {
    const kind = form.querySelector("select[name=kind]");
    if (!kind) return;
    form.querySelectorAll("[data-for-kind]").forEach((group) => {
      const negative = group.dataset.forKind === "negative";
      group.hidden = negative !== (kind.value === "negative");
    });
  }
  document.addEventListener("change", (event) => {
    const form = event.target.closest && event.target.closest("form[data-kind-form]");
    if (form && event.target.name === "kind") sync(form);
  });
  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("form[data-kind-form]").forEach(sync);
  });
})();
