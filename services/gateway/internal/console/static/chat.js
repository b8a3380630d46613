// Sovereign console chat: sends a message (POST /api/agent/…), follows
// the run by polling its status every 500 ms, and fetches the
// conversation's server-rendered HTML again whenever the run changed, so
// new messages and tool calls appear without a reload. Stop cancels the
// run. Without this script the forms still work (with reloads).
(function () {
  "use strict";

  // Forms that ask first (deleting a chat).
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.dataset && f.dataset.confirm && !window.confirm(f.dataset.confirm)) e.preventDefault();
  });

  var root = document.getElementById("chat");
  if (!root) return;

  var POLL_MS = 500;
  var chatId = root.dataset.chat || "";
  var runId = root.dataset.run || "";
  var msgs = document.getElementById("messages");
  var form = document.getElementById("send-form");
  var box = document.getElementById("message");
  var sendBtn = document.getElementById("send");
  var sendErr = document.getElementById("send-error");
  var status = document.getElementById("run-status");
  var stateEl = document.getElementById("run-state");
  var detailEl = document.getElementById("run-detail");
  var stopForm = document.getElementById("stop-form");
  var stopBtn = document.getElementById("stop");
  var runErr = document.getElementById("run-error");
  var title = document.getElementById("chat-title");
  var seen = "";     // the run's state the conversation was last fetched for
  var timer = null;  // the next poll
  var running = root.dataset.active === "1";
  var sent = "";     // the message sent last, until the conversation shows it

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
  }
  function toBottom() {
    window.scrollTo(0, document.documentElement.scrollHeight);
  }

  // api calls the JSON API; it rejects with the server's reason.
  function api(method, path, body) {
    var opt = { method: method, credentials: "same-origin", headers: { "Accept": "application/json" } };
    if (body !== undefined) {
      opt.headers["Content-Type"] = "application/json";
      opt.body = JSON.stringify(body);
    }
    return fetch(path, opt).then(function (r) {
      if (r.status === 401) { location.reload(); }
      return r.json().catch(function () { return {}; }).then(function (d) {
        if (!r.ok) {
          var err = new Error(d.error || ("HTTP " + r.status));
          err.status = r.status;
          throw err;
        }
        return d;
      });
    });
  }

  // setChat adopts the chat a new conversation's first run created.
  function setChat(id) {
    if (!id || chatId) return;
    chatId = id;
    root.dataset.chat = id;
    form.action = "/chat/" + encodeURIComponent(id) + "/messages";
    stopForm.action = "/chat/" + encodeURIComponent(id) + "/stop";
    history.replaceState(null, "", "/chat/" + encodeURIComponent(id));
  }

  function setBusy(busy) {
    running = busy;
    sendBtn.disabled = busy;
  }

  // showRun shows a run's status line, Stop button and error.
  function showRun(run) {
    status.hidden = false;
    status.className = "run-status state-" + run.state;
    stateEl.textContent = run.label;
    detailEl.textContent = run.detail;
    stopForm.hidden = !run.active;
    stopForm.elements.run.value = run.id;
    stopBtn.disabled = !!run.cancel_requested;
    stopBtn.textContent = run.cancel_requested ? "Stopping…" : "Stop";
    runErr.className = "notice " + (run.state === "cancelled" ? "warn" : "err");
    runErr.textContent = run.notice || "";
    runErr.hidden = !run.notice;
    setBusy(run.active);
  }

  // refresh fetches the conversation again, keeping the tool calls that
  // are open open and the view at the bottom when it was there.
  var loading = false, again = false;
  function refresh() {
    if (!chatId) return;
    if (loading) { again = true; return; }
    loading = true;
    var url = "/chat/" + encodeURIComponent(chatId) + "?part=messages" + (runId ? "&run=" + encodeURIComponent(runId) : "");
    fetch(url, { credentials: "same-origin" }).then(function (r) {
      if (r.redirected || r.status === 401) { location.reload(); return; }
      if (!r.ok) return;
      return r.text().then(function (html) {
        var open = {};
        msgs.querySelectorAll("details[open][data-call]").forEach(function (d) { open[d.dataset.call] = true; });
        var stick = atBottom();
        msgs.innerHTML = html; // rendered and escaped by the console
        msgs.querySelectorAll("details[data-call]").forEach(function (d) {
          if (d.dataset.call && open[d.dataset.call]) d.open = true;
        });
        if (sent) {
          // Keep showing the message just sent until the agent stored it.
          var users = msgs.querySelectorAll(".msg.user .bubble");
          if (users.length && users[users.length - 1].textContent === sent) sent = "";
          else pending(sent);
        }
        var thread = msgs.firstElementChild;
        if (thread && thread.dataset.title) {
          title.textContent = thread.dataset.title;
          document.title = thread.dataset.title + " · Sovereign console";
        }
        if (stick) toBottom();
      });
    }).catch(function () {}).then(function () {
      loading = false;
      if (again) { again = false; refresh(); }
    });
  }

  // poll follows the run until it ends.
  function poll() {
    timer = null;
    if (!runId) return;
    var id = runId;
    api("GET", "/api/agent/runs/" + encodeURIComponent(id)).then(function (run) {
      if (id !== runId) return; // a newer run took over
      setChat(run.chat_id);
      showRun(run);
      var key = [run.state, run.iteration, run.tool_calls, run.current_tool, run.updated].join("|");
      if (key !== seen) { seen = key; refresh(); }
      if (run.active) timer = setTimeout(poll, POLL_MS);
    }, function (err) {
      if (id !== runId) return;
      if (err.status === 404 || err.status === 400) {
        detailEl.textContent = err.message;
        setBusy(false);
        return;
      }
      detailEl.textContent = err.message + " · retrying…";
      timer = setTimeout(poll, 4 * POLL_MS);
    });
  }

  function follow(id) {
    if (timer) clearTimeout(timer);
    runId = id;
    root.dataset.run = id;
    seen = "";
    poll();
  }

  // pending shows the message just sent until the conversation has it.
  function pending(text) {
    var empty = document.getElementById("no-messages");
    if (empty) empty.remove();
    var thread = msgs.querySelector(".thread") || msgs;
    var m = document.createElement("div");
    m.className = "msg user pending";
    var who = document.createElement("div");
    who.className = "who";
    who.textContent = "You";
    var b = document.createElement("div");
    b.className = "bubble text";
    b.textContent = text;
    m.appendChild(who);
    m.appendChild(b);
    thread.appendChild(m);
    toBottom();
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    if (running) return;
    var text = box.value.trim();
    if (!text) { box.focus(); return; }
    setBusy(true);
    sendErr.textContent = "";
    var req = chatId
      ? api("POST", "/api/agent/chats/" + encodeURIComponent(chatId) + "/messages", { message: text })
      : api("POST", "/api/agent/runs", { message: text });
    req.then(function (run) {
      box.value = "";
      sent = text;
      pending(text);
      setChat(run.chat_id);
      showRun(run);
      follow(run.id);
    }, function (err) {
      sendErr.textContent = err.message;
      setBusy(false);
      box.focus();
    });
  });

  // Enter sends; Shift+Enter adds a line.
  box.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!running) form.requestSubmit();
    }
  });

  stopForm.addEventListener("submit", function (e) {
    e.preventDefault();
    if (!runId) return;
    stopBtn.disabled = true;
    stopBtn.textContent = "Stopping…";
    api("POST", "/api/agent/runs/" + encodeURIComponent(runId) + "/cancel").then(function (run) {
      showRun(run);
      if (!timer && run.active) timer = setTimeout(poll, POLL_MS);
    }, function (err) {
      stopBtn.disabled = false;
      stopBtn.textContent = "Stop";
      sendErr.textContent = "Stop failed: " + err.message;
    });
  });

  toBottom();
  if (runId && running) poll();
  else box.focus();
})();
