// Sovereign operator console: countdowns, relative times, clickable rows
// and the live approval queue (server-sent events, polling as a fallback).
(function () {
  "use strict";

  function human(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m " + String(s % 60).padStart(2, "0") + "s";
    var h = Math.floor(m / 60);
    if (h < 48) return h + "h " + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Date.parse(el.dataset.deadline) - now;
      el.textContent = left > 0 ? "decide within " + human(left) : "timing out…";
      el.classList.toggle("urgent", left < 30000);
    });
    document.querySelectorAll("[data-since]").forEach(function (el) {
      el.textContent = human(now - Date.parse(el.dataset.since)) + " ago";
    });
  }
  tick();
  setInterval(tick, 1000);

  // A click anywhere on an audit row opens the record.
  document.addEventListener("click", function (e) {
    var row = e.target.closest("tr[data-href]");
    if (!row || e.target.closest("a, button, input, summary")) return;
    if (String(window.getSelection())) return; // selecting text, not opening
    location.href = row.dataset.href;
  });

  var badge = document.getElementById("pending-count");
  if (!badge) return; // approvals are not configured
  var lists = document.getElementById("approval-lists");

  function setBadge(n) {
    badge.textContent = n;
    badge.classList.toggle("hot", n > 0);
  }

  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var work;
    if (lists) {
      work = fetch("/approvals?part=lists", { credentials: "same-origin" }).then(function (r) {
        if (r.redirected || r.status === 401) { location.reload(); return; }
        if (!r.ok) return;
        return r.text().then(function (html) {
          // Keep the notes being typed and the focus across the update.
          var notes = {}, focused = document.activeElement && document.activeElement.closest("form.decide");
          lists.querySelectorAll("form.decide").forEach(function (f) { notes[f.action] = f.elements.note.value; });
          lists.innerHTML = html;
          lists.querySelectorAll("form.decide").forEach(function (f) {
            if (notes[f.action]) f.elements.note.value = notes[f.action];
            if (focused && f.action === focused.action) f.elements.note.focus();
          });
          var n = document.getElementById("pending-n");
          if (n) setBadge(parseInt(n.textContent, 10) || 0);
          tick();
        });
      });
    } else {
      work = fetch("/api/approvals", { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) return;
        return r.json().then(function (d) { setBadge(d.pending.length); });
      });
    }
    work.catch(function () {}).then(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }

  var polling = null;
  function poll() {
    if (!polling) polling = setInterval(refresh, 5000);
  }
  if (!window.EventSource) { poll(); return; }
  var es = new EventSource("/api/approvals/events");
  es.addEventListener("approval", refresh);
  es.onopen = function () {
    if (polling) { clearInterval(polling); polling = null; }
    refresh(); // catch up on what happened while disconnected
  };
  es.onerror = function () {
    // The browser retries by itself; while it cannot, poll.
    poll();
  };
})();
