/* The Colocation page's only script; the page is complete without it.
   1. Theme: ?theme=dark|light wins; else, inside Airflow's UI (a same-origin iframe), Airflow's
      own light/dark class on its <html>, followed as the user switches it; else the stylesheet
      follows the browser's prefers-color-scheme.
   2. Auto-refresh: the header's checkbox reloads the page every 30 s while it is ticked; the
      choice is kept in this browser (localStorage), and ?refresh=SECONDS turns it on for a link. */
(function () {
  "use strict";
  var root = document.documentElement;
  var params = new URLSearchParams(location.search);

  function airflowTheme() {
    try {
      if (window.parent === window) return null;
      var cls = window.parent.document.documentElement.classList;
      return cls.contains("dark") ? "dark" : (cls.contains("light") ? "light" : null);
    } catch (e) { return null; }  /* not same-origin: leave it to prefers-color-scheme */
  }
  function applyTheme() {
    var theme = params.get("theme") || airflowTheme();
    if (theme === "dark" || theme === "light") root.setAttribute("data-theme", theme);
    else root.removeAttribute("data-theme");
  }
  applyTheme();
  try {
    if (!params.get("theme") && window.parent !== window) {
      new MutationObserver(applyTheme).observe(window.parent.document.documentElement,
                                               {attributes: true, attributeFilter: ["class", "style"]});
    }
  } catch (e) { /* cross-origin parent */ }

  var KEY = "colocate.autoRefresh", timer = null;
  function stored() { try { return localStorage.getItem(KEY) === "1"; } catch (e) { return false; } }
  function store(on) { try { localStorage.setItem(KEY, on ? "1" : "0"); } catch (e) { /* private mode */ } }
  function schedule(box) {
    clearTimeout(timer);
    if (box.checked) {
      var seconds = Math.max(5, +(params.get("refresh") || box.dataset.seconds || 30));
      timer = setTimeout(function () { location.reload(); }, seconds * 1000);
      box.parentElement.setAttribute("data-next", String(seconds));
    } else {
      box.parentElement.removeAttribute("data-next");
    }
  }
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("auto-refresh");
    if (!box) return;
    if (params.get("refresh")) { box.dataset.seconds = params.get("refresh"); box.checked = true; store(true); }
    else box.checked = stored();
    box.addEventListener("change", function () { store(box.checked); schedule(box); });
    schedule(box);
  });
})();
