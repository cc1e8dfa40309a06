/* The Colocation page's only script; the page is complete without it.
   1. Theme: ?theme=dark|light wins; else, inside Airflow's UI (a same-origin iframe), Airflow's
      own light/dark class on its <html>, followed as the user switches it; else the stylesheet
      follows the browser's prefers-color-scheme.
   2. Auto-refresh: the header's checkbox reloads the page every 30 s while it is ticked; the
      choice is kept in this browser (localStorage), and ?refresh=SECONDS turns it on for a link.
   3. Links out of the page (target=_top: the API docs, a task's page in Airflow): Airflow's iframe
      is sandboxed without allow-top-navigation, so the browser ignores target=_top there, and a
      script in the frame may not navigate the top window either (parent.location throws). It may
      touch the parent's document (allow-same-origin), though, and a link that belongs to that
      document navigates it: so a click is handed to an anchor made there. A plain click replaces
      Airflow's page; a middle, Ctrl/Cmd or Shift click opens a new tab, as on any link (the frame
      may not open one itself: no allow-popups). On its own page, or under a cross-origin parent,
      the browser follows the link as usual.
   4. Relative times ("in 29 min", "3 min ago") stay true while the page is open: recomputed every
      20 s from each one's data-at, against the server's clock when it rendered the page (moved on
      by the browser's), so a browser with a skewed clock reads the same; the words are page.py's.
   5. Times follow Airflow's time zone as its UI does: the user's choice (Airflow keeps it in this
      browser's localStorage, key "timezone", as JSON), else the browser's own zone, which is
      Airflow's default too. The server renders UTC; each <time datetime> is rewritten in that zone,
      its tooltip keeping the UTC time. The header names the zone. */
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

  function parentDocument() {
    try { return window.parent !== window ? window.parent.document : null; } catch (e) { return null; }
  }
  function leaveFrame(ev) {
    var link = ev.target && ev.target.closest ? ev.target.closest("a[target=_top][href]") : null;
    var doc = link && !ev.defaultPrevented ? parentDocument() : null;
    if (!doc || ev.button > 1) return;
    var newTab = ev.button === 1 || ev.ctrlKey || ev.metaKey || ev.shiftKey;
    if (ev.type === "auxclick" && !newTab) return;
    ev.preventDefault();
    var out = doc.createElement("a");
    out.href = link.href;  /* absolute: resolved against this page */
    if (newTab) { out.target = "_blank"; out.rel = "noopener"; }
    out.style.display = "none";
    doc.body.appendChild(out);
    out.click();
    out.remove();
  }
  function relative(seconds) {
    var n = Math.abs(seconds), text;
    if (n < 45) return n < 5 ? "now" : (seconds > 0 ? "in " + n.toFixed(0) + " s" : n.toFixed(0) + " s ago");
    if (n < 90 * 60) text = (n / 60).toFixed(0) + " min";
    else if (n < 48 * 3600) {
      var total = Math.round(n / 60), h = Math.floor(total / 60), m = total % 60;
      text = h + " h" + (m ? " " + m + " min" : "");
    } else text = (n / 86400).toFixed(0) + " days";
    return seconds > 0 ? "in " + text : text + " ago";
  }
  var loaded = Date.now();
  function tick() {
    var stamp = document.getElementById("refreshed-at");
    var rendered = stamp ? Date.parse(stamp.dataset.rendered) : NaN;
    if (isNaN(rendered)) return;
    var now = rendered + (Date.now() - loaded);
    document.querySelectorAll(".rel[data-at]").forEach(function (el) {
      var at = Date.parse(el.dataset.at);
      if (!isNaN(at)) el.textContent = relative((at - now) / 1000);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { setInterval(tick, 20000); });

  function airflowZone() {
    var stores = [];
    try { if (window.parent !== window) stores.push(window.parent.localStorage); } catch (e) { /* cross-origin */ }
    try { stores.push(window.localStorage); } catch (e) { /* storage off */ }
    for (var i = 0; i < stores.length; i++) {
      try {
        var v = stores[i].getItem("timezone");
        if (v) { v = JSON.parse(v); new Intl.DateTimeFormat("en", {timeZone: v}); return v; }
      } catch (e) { /* not a zone */ }
    }
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  }
  function inZone(date, zone) {
    var parts = {};
    new Intl.DateTimeFormat("en-CA", {timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23"}).formatToParts(date)
      .forEach(function (p) { parts[p.type] = p.value; });
    return {day: parts.year + "-" + parts.month + "-" + parts.day,
            time: parts.hour + ":" + parts.minute + ":" + parts.second};
  }
  function localTimes() {
    var zone = airflowZone(), stamp = document.getElementById("refreshed-at");
    var now = stamp ? new Date(Date.parse(stamp.dataset.rendered)) : new Date();
    var today = inZone(isNaN(now) ? new Date() : now, zone).day;
    document.querySelectorAll("time.ts[datetime]").forEach(function (el) {
      var at = new Date(Date.parse(el.getAttribute("datetime")));
      if (isNaN(at)) return;
      var t = inZone(at, zone);
      el.textContent = t.day === today ? t.time : t.day + " " + t.time.slice(0, 5);
      el.title = el.getAttribute("datetime").replace("+00:00", "Z") + " (UTC); shown in " + zone;
    });
    var label = document.getElementById("time-zone");
    if (label) label.textContent = zone;
    root.setAttribute("data-time-zone", zone);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", localTimes);
  else localTimes();
  window.addEventListener("storage", function (e) { if (e.key === "timezone") localTimes(); });

  document.addEventListener("click", leaveFrame);
  document.addEventListener("auxclick", leaveFrame);  /* the middle button fires no click */
})();
