/* Cluster dashboard: draw the server-built figures, then extend them from /ws/cluster/.
 *
 * Each live trace carries meta = {quota, field}; a "sample" payload is
 * {kind: "sample", at: ISO time, quotas: {id: {in_quota, borrowed, pending, preemptions}},
 *  allocated, capacity} with GPU amounts in milli-GPU.
 */
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("dashboard-figures").textContent);
  var live = JSON.parse(document.getElementById("dashboard-live").textContent);
  var config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  var TIME_CHARTS = ["allocation", "pending"];

  // The first chart alone, then the rest in a later task, so the browser can paint it at once
  // ("tp-first-chart" marks that moment for bench/first_chart.py and the browser's profiler).
  var keys = Object.keys(figures);
  function draw(key) {
    var fig = figures[key];
    return Plotly.newPlot("chart-" + key, fig.data, fig.layout || {}, config);
  }
  if (keys.length) {
    draw(keys[0]).then(function () {
      if (window.performance && performance.mark) performance.mark("tp-first-chart");
    });
    setTimeout(function () { keys.slice(1).forEach(draw); }, 0);
  }

  function el(key) { return document.getElementById("chart-" + key); }

  // plotly.js reads dates without offsets; the server sends UTC, so drop the offset.
  function plotTime(iso) {
    var d = new Date(iso);
    return d.toISOString().slice(0, 19).replace("T", " ");
  }
  function hourKey(iso) { return plotTime(iso).slice(0, 13) + ":00:00"; }
  function shift(plotDate, ms) {
    var d = new Date(plotDate.replace(" ", "T") + "Z");
    return new Date(d.getTime() + ms).toISOString().slice(0, 19).replace("T", " ");
  }

  function valueOf(sample, meta) {
    var q = sample.quotas[String(meta.quota)];
    return q ? q[meta.field] || 0 : 0;
  }

  // Drop points that fell out of the window, in place (plot dates sort as strings).
  function trim(trace, start) {
    var n = 0;
    while (n < trace.x.length && trace.x[n] < start) n++;
    if (n) { trace.x.splice(0, n); trace.y.splice(0, n); }
  }

  function extendTimeChart(key, sample, at) {
    var div = el(key);
    var start = shift(at, -live.window_ms);
    var indices = [], xs = [], ys = [];
    div.data.forEach(function (trace, i) {
      if (!trace.meta || trace.meta.quota === undefined) return;
      trim(trace, start);
      indices.push(i);
      xs.push([at]);
      ys.push([valueOf(sample, trace.meta) / 1000]);
    });
    if (!indices.length) return;
    Plotly.extendTraces(div, { x: xs, y: ys }, indices);
    // Keep the window at 24 hours ending at the newest sample (simulated time, not wall time).
    Plotly.relayout(div, { "xaxis.range": [start, at] });
  }

  function extendPreemptions(sample) {
    var div = el("preemptions");
    var hour = hourKey(sample.at);
    var firstHour = hourKey(new Date(new Date(sample.at).getTime() - live.window_ms).toISOString());
    var extendIdx = [], xs = [], ys = [], changed = false;
    div.data.forEach(function (trace, i) {
      if (!trace.meta || trace.meta.quota === undefined) return;
      trim(trace, firstHour);
      var n = valueOf(sample, trace.meta);
      var last = trace.x.length - 1;
      if (last >= 0 && trace.x[last] === hour) {
        if (n) { trace.y[last] += n; changed = true; }
      } else {
        extendIdx.push(i); xs.push([hour]); ys.push([n]);
      }
    });
    if (extendIdx.length) Plotly.extendTraces(div, { x: xs, y: ys }, extendIdx);
    else if (changed) Plotly.redraw(div);
  }

  function updateShare(sample) {
    if (!sample.capacity) return;
    var pct = Math.round(sample.allocated / sample.capacity * 1000) / 10;
    var text = (sample.allocated / 1000) + " of " + (sample.capacity / 1000);
    Plotly.restyle(el("share"), { value: [pct], "title.text": [text + " GPUs allocated"] });
    var summary = document.getElementById("allocated-now");
    if (summary) summary.textContent = text + " schedulable GPUs allocated now";
  }

  function onSample(sample) {
    var at = plotTime(sample.at);
    TIME_CHARTS.forEach(function (key) { extendTimeChart(key, sample, at); });
    extendPreemptions(sample);
    updateShare(sample);
    var newest = document.getElementById("newest-sample");
    if (newest) {
      var time = newest.querySelector("time") || newest.appendChild(document.createElement("time"));
      time.setAttribute("datetime", sample.at);
      time.dataset.when = "minute";
      time.textContent = window.tidepoolTime
        ? window.tidepoolTime.format(Date.parse(sample.at), "minute", window.tidepoolTime.zone())
        : at.slice(0, 16) + " UTC";
    }
  }

  var status = window.tidepoolLive || { connecting: function () {}, open: function () {}, closed: function () {} };
  status.connecting();

  var retry = 500;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + live.path);
    socket.onopen = function () { retry = 500; status.open(); };
    socket.onmessage = function (event) {
      var data = JSON.parse(event.data);
      (data.kind === "batch" ? data.events : [data]).forEach(function (payload) {
        if (payload.kind === "sample") onSample(payload);
      });
    };
    socket.onclose = function () {
      status.closed(false);
      // Soon (samples resume within 2.5 s of Redis returning), and spread out over the pages.
      setTimeout(connect, retry + Math.random() * 500);
      retry = Math.min(retry * 2, 2000);
    };
  }
  connect();
  window.tidepoolDashboard = { onSample: onSample };
})();
