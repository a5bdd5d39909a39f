// Live workspace pages: one websocket per page (/ws/workspaces/<id>/); each event updates the
// rows or panels of its workload in place, then re-fetches that part from the server so what
// the page shows is always what the database says. A socket that drops is reopened within
// 2.5 s and catches up on what it missed (see "Catching up"). Plain JS, no framework.
(function () {
  "use strict";

  var anchor = document.getElementById("live");
  if (!anchor || !window.WebSocket) return;

  var pending = {};
  var WHY = {
    reclaim: ", whose quota took back the capacity it had lent",
    child_preemption: " by child-level preemption",
    priority: ", which has a higher priority",
    fair_share: " to restore fair shares of idle capacity",
    min: " after its quota's guarantee was lowered",
  };
  var status = window.tidepoolLive || { connecting: function () {}, open: function () {}, closed: function () {} };
  status.connecting();

  function slug(text) {
    return String(text).toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
  }

  function setStatus(scope, status) {
    if (!status) return;
    scope.querySelectorAll("[data-field=status]").forEach(function (el) {
      el.textContent = status;
      el.className = "badge status-" + slug(status);
    });
  }

  function setQuota(scope, inQuota) {
    scope.querySelectorAll("[data-field=in_quota]").forEach(function (el) {
      el.textContent = "";
      if (inQuota === null || inQuota === undefined) {
        var dash = document.createElement("span");
        dash.className = "muted";
        dash.textContent = "—";
        el.appendChild(dash);
        return;
      }
      var badge = document.createElement("span");
      badge.className = "badge " + (inQuota ? "ok" : "warn");
      badge.textContent = inQuota ? "In Quota" : "Not in Quota";
      el.appendChild(badge);
    });
  }

  function setPreempted(scope) {
    scope.querySelectorAll("[data-field=pods] .pod-state, [data-field=pod-status]").forEach(
      function (el) {
        if (/Running|Pending/.test(el.textContent)) {
          el.textContent = el.textContent.replace(/Running|Pending/, "Resource Preempted");
          el.className = "pod-state pod-resource-preempted";
        }
      }
    );
  }

  function fetchText(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "live" } })
      .then(function (response) {
        if (!response.ok) throw new Error(response.status);
        return response.text();
      });
  }

  function replaceWith(element, html) {
    var holder = document.createElement(element.tagName === "TR" ? "tbody" : "div");
    holder.innerHTML = html.trim();
    var fresh = holder.firstElementChild;
    if (fresh && element.parentNode) element.parentNode.replaceChild(fresh, element);
  }

  // Several events of one cycle arrive together: fetch once, shortly after the last.
  function later(key, run) {
    clearTimeout(pending[key]);
    pending[key] = setTimeout(function () {
      delete pending[key];
      run();
    }, 120);
  }

  function refreshRow(id) {
    later("row-" + id, function () {
      var current = document.querySelector("tr[data-workload='" + id + "'][data-row-url]");
      if (!current) return;
      fetchText(current.dataset.rowUrl).then(function (html) {
        var still = document.querySelector("tr[data-workload='" + id + "'][data-row-url]");
        if (still) replaceWith(still, html);
      }).catch(function () {});
    });
  }

  function addRow(table, id) {
    later("new-" + id, function () {
      if (table.querySelector("tr[data-workload='" + id + "']")) return;
      var url = table.dataset.liveNew.replace(/\/0\/row\/$/, "/" + id + "/row/");
      fetchText(url).then(function (html) {
        if (table.querySelector("tr[data-workload='" + id + "']")) return;
        var body = table.tBodies[0];
        var empty = body.querySelector("tr.empty");
        if (empty) empty.remove();
        var holder = document.createElement("tbody");
        holder.innerHTML = html.trim();
        if (holder.firstElementChild) body.insertBefore(holder.firstElementChild, body.firstChild);
      }).catch(function () {});
    });
  }

  function refreshPanel(panel) {
    later("panel", function () {
      fetchText(panel.dataset.liveUrl).then(function (html) {
        var still = document.getElementById(panel.id);
        if (still) replaceWith(still, html);
      }).catch(function () {});
    });
  }

  function refreshReplicas(scope, id) {
    later("replicas-" + id, function () {
      fetchText(scope.dataset.replicasUrl).then(function (text) {
        scope.querySelectorAll("[data-field=replicas]").forEach(function (el) {
          el.textContent = text;
        });
      }).catch(function () {});
    });
  }

  function notice(text) {
    var box = document.querySelector(".live-notices");
    if (!box) return;
    var item = document.createElement("div");
    item.className = "live-notice";
    item.setAttribute("role", "status");
    item.textContent = text;
    // The latest three, each for ten seconds: enough to read, never a wall over the page.
    box.appendChild(item);
    while (box.children.length > 3) box.removeChild(box.firstElementChild);
    setTimeout(function () { item.remove(); }, 10000);
  }

  function handle(event) {
    var id = String(event.workload);
    var inQuota = Object.prototype.hasOwnProperty.call(event, "in_quota");
    document.querySelectorAll("[data-workload='" + id + "']").forEach(function (scope) {
      setStatus(scope, event.status);
      if (inQuota && scope.querySelector("[data-field=in_quota]")) setQuota(scope, event.in_quota);
      if (event.kind === "preempted") setPreempted(scope);
      if (scope.dataset.rowUrl) refreshRow(id);
      if (scope.dataset.liveUrl) refreshPanel(scope);
      if (scope.dataset.replicasUrl) refreshReplicas(scope, id);
    });
    if (event.kind === "submitted") {
      document.querySelectorAll("table[data-live-new]").forEach(function (table) {
        if (!table.querySelector("tr[data-workload='" + id + "']")) addRow(table, id);
      });
    }
    if (event.kind === "preempted") {
      // The reason is a code of the scheduler's (jobs/scheduling/types.py REASONS): say it
      // in words, or not at all.
      var why = WHY[event.reason] || "";
      notice(event.name + " was preempted by " + (event.by || "another workload") + why + ".");
    }
  }

  function refreshAll() {
    document.querySelectorAll("[data-workload]").forEach(function (scope) {
      handle({ workload: scope.dataset.workload });
    });
  }

  // Catching up (jobs/consumers.py): each event carries seq, the id of its stored row, and on
  // every open the page sends {"after": seq} and is sent the events it missed, then
  // {"kind": "caught_up", "seq": newest}. A transaction takes its ids when it writes and is
  // pushed when it commits, so one that commits late can carry a seq below one already seen:
  // the page asks from the highest seq it had seen SETTLE ms before the socket closed (longer
  // than any transaction runs) and skips, by seq, the events it has handled since.
  var SETTLE = 30000;
  var settled = null; // highest seq seen at least SETTLE ms ago
  var recent = []; // [seq, time seen] of the seqs seen since, oldest first
  var seen = {}; // the seqs in recent
  var after = null; // what the next open asks for

  function settle(now) {
    while (recent.length && (recent[0][1] < now - SETTLE || recent.length > 5000)) {
      var old = recent.shift();
      delete seen[old[0]];
      settled = settled === null ? old[0] : Math.max(settled, old[0]);
    }
  }

  function note(seq, now) {
    recent.push([seq, now]);
    seen[seq] = true;
    settle(now);
  }

  function askFrom(now) {
    settle(now);
    if (settled !== null) return settled;
    var lowest = null; // the page is younger than SETTLE: from the first seq it saw
    recent.forEach(function (entry) {
      if (lowest === null || entry[0] < lowest) lowest = entry[0];
    });
    return lowest;
  }

  function receive(event) {
    var now = Date.now();
    if (event.kind === "caught_up" || event.kind === "resync") {
      if (event.kind === "resync") refreshAll(); // too much missed to replay
      note(event.seq, now);
      return;
    }
    if (event.seq !== undefined && event.seq !== null) {
      if (seen[event.seq]) return; // replayed, and handled already
      note(event.seq, now);
    }
    handle(event);
  }

  var delay = 500;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + anchor.dataset.ws);
    var opened = false;
    socket.onopen = function () {
      opened = true;
      delay = 500;
      document.documentElement.dataset.live = "open";
      status.open();
      socket.send(JSON.stringify({ after: after }));
    };
    socket.onmessage = function (message) {
      try {
        var data = JSON.parse(message.data);
        // A push of several events comes as one frame (jobs/consumers.py `frame`).
        (data.kind === "batch" ? data.events : [data]).forEach(receive);
      } catch (error) {
        if (window.console) console.error("live event", error);
      }
    };
    socket.onclose = function (closed) {
      document.documentElement.dataset.live = "closed";
      if (opened) after = askFrom(Date.now());
      status.closed(closed.code === 4403);
      if (closed.code === 4403) return; // refused: not a member any more
      // Soon, and spread out: every page reconnects when Redis or a web process returns.
      setTimeout(connect, delay + Math.random() * 500);
      delay = Math.min(delay * 2, 2000);
    };
  }
  connect();
})();
