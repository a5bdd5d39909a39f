/* A what-if result page: poll the replay while it runs, then draw its plotly figures. */
(function () {
  "use strict";
  var box = document.querySelector("[data-poll]");
  if (box) {
    var bar = box.querySelector("progress");
    var label = box.querySelector("[data-status]");
    var poll = function () {
      fetch(box.getAttribute("data-poll"), { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (run) {
          bar.value = Math.round(100 * (run.progress || 0));
          label.textContent = run.status.charAt(0).toUpperCase() + run.status.slice(1);
          if (run.status === "done" || run.status === "failed") window.location.reload();
          else window.setTimeout(poll, 1000);
        })
        .catch(function () { window.setTimeout(poll, 3000); });
    };
    window.setTimeout(poll, 500);
  }
  var source = document.getElementById("whatif-figures");
  if (!source || !window.Plotly) return;
  var figures = JSON.parse(source.textContent);
  var config = { responsive: true, displaylogo: false };
  Object.keys(figures).forEach(function (key) {
    var el = document.getElementById("chart-" + key);
    if (el) Plotly.newPlot(el, figures[key].data, figures[key].layout || {}, config);
  });
})();
