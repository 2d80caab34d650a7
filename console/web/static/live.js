// The fleet's list, live: the server sends the list's HTML (drawn and escaped by the server) as server-sent events;
// this puts it in place. No other script runs on the page (the Content-Security-Policy forbids inline script).
(function () {
  "use strict";
  var box = document.querySelector("[data-live]");
  if (!box || !window.EventSource) { return; }
  var source = new EventSource(box.getAttribute("data-live"));
  source.addEventListener("list", function (e) {
    // A section the reader opened (the plan) stays open through the redraw: the same id, opened again.
    var open = Array.prototype.map.call(box.querySelectorAll("details[open][id]"), function (d) { return d.id; });
    box.innerHTML = e.data;
    open.forEach(function (id) { var d = document.getElementById(id); if (d) { d.open = true; } });
  });
  source.addEventListener("error", function () { box.classList.add("stale"); });
  source.addEventListener("open", function () { box.classList.remove("stale"); });
}());
