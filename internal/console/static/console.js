// The console's progressive enhancement: parts marked data-live are fetched again every few
// seconds (the server answers the part alone when asked with X-Console-Fragment), and a
// checkbox marked data-select-all checks the rows of its form. Without it every page works.
(function () {
  "use strict";
  var every = 3000;
  var stopped = false;

  function refresh(el) {
    var url = el.getAttribute("data-live") || (location.pathname + location.search);
    return fetch(url, { headers: { "X-Console-Fragment": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (res) {
        if (res.status === 401) {
          stopped = true;
          el.classList.add("stale");
          el.insertAdjacentHTML("afterbegin", '<p class="error" role="alert">The console session has ended: <a href="/console/login">log in again</a>.</p>');
          return;
        }
        if (!res.ok) { el.classList.add("stale"); return; }
        return res.text().then(function (html) {
          // Keep the keyboard focus where it is when the part that held it is replaced.
          if (el.contains(document.activeElement)) { return; }
          el.innerHTML = html;
          el.classList.remove("stale");
        });
      })
      .catch(function () { el.classList.add("stale"); });
  }

  function tick() {
    if (stopped || document.hidden) { return; }
    document.querySelectorAll("[data-live]").forEach(refresh);
  }

  function selectAll(box) {
    box.addEventListener("change", function () {
      var form = box.closest("form");
      if (!form) { return; }
      form.querySelectorAll('input[type=checkbox][name=id]').forEach(function (cb) { cb.checked = box.checked; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-select-all]").forEach(selectAll);
    if (document.querySelector("[data-live]")) { setInterval(tick, every); }
  });
})();
