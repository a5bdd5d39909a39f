// The Logs card of a workload page (templates/jobs/_logs.html). The page renders without the
// log; this asks the logs endpoint for the latest attempt of the first replica once the page
// has loaded. A replica and an earlier attempt can be picked. Follow, for a replica that still
// runs, asks every few seconds for the lines written after the last one shown and appends
// them, until the replica ends. Plain JS, no framework.
(function () {
  "use strict";

  var card = document.getElementById("logs");
  if (!card || !window.fetch) return;

  var POLL_MS = 3000;
  var TAIL = 200;
  var KEEP = 5000; // lines kept on the page while following
  var replicaPick = card.querySelector("[data-logs=replica]");
  var attemptPick = card.querySelector("[data-logs=attempt]");
  var follow = card.querySelector("[data-logs=follow]");
  var notice = card.querySelector("[data-logs=notice]");
  var box = card.querySelector("[data-logs=lines]");
  var shown = { replica: null, attempt: null, since: null, live: false };
  var asked = 0; // answers to older questions (another replica picked since) are dropped
  var timer = null;

  function ask(params) {
    var query = new URLSearchParams();
    Object.keys(params).forEach(function (key) {
      if (params[key] !== null && params[key] !== undefined) query.set(key, params[key]);
    });
    var mine = ++asked;
    return fetch(card.dataset.logsUrl + "?" + query.toString(), {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    }).then(function (body) {
      return mine === asked ? body : null;
    });
  }

  function choices(select, values, chosen, word) {
    select.textContent = "";
    values.forEach(function (value) {
      var option = document.createElement("option");
      option.value = String(value);
      option.textContent = word + " " + value;
      option.selected = value === chosen;
      select.appendChild(option);
    });
    select.parentNode.hidden = values.length < 2;
  }

  function lineElement(line) {
    var item = document.createElement("span");
    var match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)\S*Z (.*)$/.exec(line);
    if (match) {
      var time = document.createElement("span");
      time.className = "log-time";
      time.textContent = match[1] + " " + match[2] + " ";
      item.appendChild(time);
      item.appendChild(document.createTextNode(match[3] + "\n"));
    } else {
      item.textContent = line + "\n";
    }
    return item;
  }

  function append(lines) {
    var atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    lines.forEach(function (line) { box.appendChild(lineElement(line)); });
    while (box.childNodes.length > KEEP) box.removeChild(box.firstChild);
    box.hidden = !box.childNodes.length;
    if (atBottom || follow.checked) box.scrollTop = box.scrollHeight;
  }

  function describe(body) {
    if (body.notice) return body.notice;
    if (!body.lines.length && !box.childNodes.length) return body.pod + " has printed nothing yet.";
    var where = body.pod + " (" + body.status + ")";
    if (follow.checked && body.live) return "Following " + where + ": new lines appear as they are written.";
    return where + (body.live ? "" : ": ended, nothing more will be written.");
  }

  function show(body) {
    shown = { replica: body.replica, attempt: body.attempt, since: body.since, live: body.live };
    choices(replicaPick, body.replicas, body.replica, "Replica");
    choices(attemptPick, body.attempts, body.attempt, "Attempt");
    box.textContent = "";
    append(body.lines);
    follow.disabled = !body.live;
    if (!body.live) stopFollowing();
    notice.textContent = describe(body);
  }

  function failed(error) {
    notice.textContent = "Could not load the log (" + error.message + "); try again shortly.";
  }

  function load(replica, attempt) {
    stopFollowing();
    ask({ replica: replica, attempt: attempt, tail: TAIL }).then(function (body) {
      if (body) show(body);
    }).catch(failed);
  }

  function poll() {
    ask({ replica: shown.replica, attempt: shown.attempt, tail: KEEP, since: shown.since })
      .then(function (body) {
        if (!body || !follow.checked) return;
        append(body.lines);
        shown.since = body.since;
        shown.live = body.live;
        if (!body.live) {
          stopFollowing();
          follow.disabled = true;
        }
        notice.textContent = describe(body);
      })
      .catch(failed)
      .then(function () {
        if (follow.checked) timer = setTimeout(poll, POLL_MS);
      });
  }

  function stopFollowing() {
    clearTimeout(timer);
    timer = null;
    follow.checked = false;
  }

  replicaPick.addEventListener("change", function () { load(replicaPick.value, null); });
  attemptPick.addEventListener("change", function () {
    load(replicaPick.value || shown.replica, attemptPick.value);
  });
  follow.addEventListener("change", function () {
    if (follow.checked) {
      box.scrollTop = box.scrollHeight;
      poll();
    } else {
      stopFollowing();
    }
  });

  if (document.readyState === "complete") load(null, null);
  else window.addEventListener("load", function () { load(null, null); });
})();
