// The fleet's list, live: the server sends the list's HTML (drawn and escaped by the server) as server-sent events;
// this puts it in place. No other script runs on the page (the Content-Security-Policy forbids inline script).
(function () {
  "use strict";
  var box = document.querySelector("[data-live]");
  if (!box || !window.EventSource) { return; }
  var source = new EventSource(box.getAttribute("data-live"));
  source.addEventListener("list", function (e) { box.innerHTML = e.data; });
  source.addEventListener("error", function () { box.classList.add("stale"); });
  source.addEventListener("open", function () { box.classList.remove("stale"); });
}());
