// The page's chrome: times in the display zone, ages that tick at the cluster clock's pace,
// and the Live / Reconnecting / Offline badge of pages fed by a websocket. Plain JS, no
// framework; loaded by base.html before each page's own scripts.
(function () {
  "use strict";

  var root = document.documentElement;
  var COOKIE = "tp_tz";
  root.classList.add("js");

  // Wide tables scroll inside a box of their own rather than the page sideways.
  function wrapTables(scope) {
    scope.querySelectorAll("main table").forEach(function (table) {
      var parent = table.parentNode;
      if (parent.classList && parent.classList.contains("table-scroll")) return;
      var box = document.createElement("div");
      box.className = "table-scroll";
      parent.insertBefore(box, table);
      box.appendChild(table);
    });
  }
  wrapTables(document);

  // --- The cluster clock (simulated in the demo): its time when the page was rendered,
  // and how many cluster seconds pass per real second (console.context_processors.clock).
  var meta = document.querySelector("meta[name=tp-clock]");
  var renderedAt = meta ? Date.parse(meta.content) : Date.now();
  var speed = meta ? parseFloat(meta.dataset.speed || "1") : 1;
  var loadedAt = Date.now();
  function clusterNow() {
    return renderedAt + (Date.now() - loadedAt) * speed;
  }

  // --- Zones. The cookie holds an IANA name, or "browser" (or nothing): the browser's zone.
  function cookieZone() {
    var match = document.cookie.match(/(?:^|;\s*)tp_tz=([^;]*)/);
    return match ? decodeURIComponent(match[1]) : "browser";
  }
  function displayZone() {
    var picked = cookieZone();
    if (picked && picked !== "browser") return picked;
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch (error) {
      return "UTC";
    }
  }

  var formatters = {};
  function formatter(zone, seconds) {
    var key = zone + (seconds ? ":s" : "");
    if (!formatters[key]) {
      var options = {
        timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short",
      };
      if (seconds) options.second = "2-digit";
      formatters[key] = new Intl.DateTimeFormat("en-US", options);
    }
    return formatters[key];
  }

  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  // The same shapes as the server's (console/templatetags/tidepool.py WHEN_FORMATS).
  function formatWhen(ms, style, zone) {
    var parts = {};
    formatter(zone, style !== "minute").formatToParts(new Date(ms)).forEach(function (p) {
      parts[p.type] = p.value;
    });
    var time = parts.hour + ":" + parts.minute + (style === "minute" ? "" : ":" + parts.second);
    var name = parts.timeZoneName || zone;
    if (style === "short") {
      return MONTHS[parseInt(parts.month, 10) - 1] + " " + parseInt(parts.day, 10) + " " + time + " " + name;
    }
    return parts.year + "-" + parts.month + "-" + parts.day + " " + time + " " + name;
  }

  function renderTimes(scope) {
    var zone = displayZone();
    (scope || document).querySelectorAll("time[data-when]").forEach(function (el) {
      if (el.dataset.shownIn === zone) return;
      var ms = Date.parse(el.getAttribute("datetime"));
      if (isNaN(ms)) return;
      try {
        el.textContent = formatWhen(ms, el.dataset.when, zone);
        el.dataset.shownIn = zone;
      } catch (error) {
        // An unknown zone name: keep the server's text.
      }
    });
  }

  // --- Ages and time left, as jobs/views age() writes them: 45s, 12m, 3h 05m, 2d 4h.
  function ageText(seconds) {
    seconds = Math.max(Math.floor(seconds), 0);
    if (seconds < 60) return seconds + "s";
    var minutes = Math.floor(seconds / 60);
    if (minutes < 60) return minutes + "m";
    var hours = Math.floor(minutes / 60);
    minutes = minutes % 60;
    if (hours < 24) return hours + "h " + (minutes < 10 ? "0" : "") + minutes + "m";
    return Math.floor(hours / 24) + "d " + (hours % 24) + "h";
  }

  function tick() {
    var now = clusterNow();
    document.querySelectorAll("time[data-age]").forEach(function (el) {
      var ms = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(ms)) el.textContent = ageText((now - ms) / 1000);
    });
    document.querySelectorAll("time[data-left]").forEach(function (el) {
      var ms = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(ms)) el.textContent = ageText((ms - now) / 1000);
    });
    renderTimes(document);
  }

  // --- The zone picker in the top bar.
  function zonePicker() {
    var select = document.getElementById("tz-select");
    if (!select) return;
    var have = {};
    Array.prototype.forEach.call(select.options, function (o) { have[o.value] = true; });
    var browserOption = select.querySelector("option[value=browser]");
    if (browserOption) browserOption.textContent = "Browser (" + displayZoneOf("browser") + ")";
    if (Intl.supportedValuesOf) {
      Intl.supportedValuesOf("timeZone").forEach(function (name) {
        if (have[name]) return;
        var option = document.createElement("option");
        option.value = option.textContent = name;
        select.appendChild(option);
      });
    }
    select.value = cookieZone();
    select.addEventListener("change", function () {
      document.cookie = COOKIE + "=" + encodeURIComponent(select.value) +
        "; path=/; max-age=31536000; SameSite=Lax";
      document.querySelectorAll("time[data-when]").forEach(function (el) {
        delete el.dataset.shownIn;
      });
      renderTimes(document);
    });
    select.closest("form").addEventListener("submit", function (event) { event.preventDefault(); });
  }
  function displayZoneOf(picked) {
    if (picked !== "browser") return picked;
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { return "UTC"; }
  }

  // --- Live / Reconnecting / Offline. live.js and dashboard.js report their socket here.
  // A socket that stays closed OFFLINE_AFTER ms, or is refused, is Offline: the page's rows
  // are then marked stale until it is back.
  var OFFLINE_AFTER = 5000;
  var TEXT = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…", offline: "Offline" };
  var offlineTimer = null;
  function setLive(state) {
    var badge = document.getElementById("live-status");
    if (state === "reconnecting" && root.dataset.liveState === "offline") state = "offline";
    root.dataset.liveState = state;
    if (badge) {
      badge.hidden = false;
      badge.dataset.state = state;
      badge.textContent = TEXT[state] || state;
      badge.title = state === "offline"
        ? "The live feed is down: rows may be out of date. The page keeps trying to reconnect."
        : state === "live" ? "Updates arrive as they happen." : "";
    }
    var stale = state === "offline";
    root.classList.toggle("live-stale", stale);
    document.querySelectorAll("[data-workload], .live-feed").forEach(function (el) {
      el.classList.toggle("stale", stale);
    });
    var hint = document.getElementById("stale-hint");
    if (hint) hint.hidden = !stale;
    // Counted from the first drop: the retries in between do not restart the count.
    if (state === "reconnecting") {
      if (offlineTimer === null) {
        offlineTimer = setTimeout(function () { setLive("offline"); }, OFFLINE_AFTER);
      }
    } else {
      clearTimeout(offlineTimer);
      offlineTimer = null;
    }
  }
  window.tidepoolLive = {
    connecting: function () { setLive("connecting"); },
    open: function () { setLive("live"); },
    closed: function (refused) { setLive(refused || !navigator.onLine ? "offline" : "reconnecting"); },
    state: function () { return root.dataset.liveState; },
  };
  // Rows added while offline are stale as well.
  if (window.MutationObserver) {
    new MutationObserver(function (records) {
      var stale = root.dataset.liveState === "offline";
      records.forEach(function (record) {
        record.addedNodes.forEach(function (node) {
          if (node.nodeType !== 1) return;
          if (stale && node.matches("[data-workload]")) node.classList.add("stale");
          renderTimes(node);
        });
      });
    }).observe(document.body, { childList: true, subtree: true });
  }

  zonePicker();
  tick();
  setInterval(tick, 1000);
  window.tidepoolTime = { format: formatWhen, zone: displayZone, clusterNow: clusterNow };
})();
