// Live deadline countdowns and ages on the inbox page (the server renders the first values;
// this only keeps them ticking). Same format as views.span on the server.
"use strict";
(function () {
  function span(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    if (s >= 3600) return Math.floor(s / 3600) + "h " + pad(Math.floor((s % 3600) / 60)) + "m";
    if (s >= 60) return Math.floor(s / 60) + "m " + pad(s % 60) + "s";
    return s + "s";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("time.countdown").forEach(function (el) {
      var left = (Date.parse(el.dataset.deadline) - now) / 1000;
      el.textContent = left > 0 ? span(left) : "timed out";
      var call = el.closest(".call");
      if (call) call.classList.toggle("expired", left <= 0);
      if (call) call.classList.toggle("soon", left > 0 && left < 60);
    });
    document.querySelectorAll("time.age-of").forEach(function (el) {
      el.textContent = span((now - Date.parse(el.dataset.since)) / 1000);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
  });
})();
