/* A quota's Monitoring tab: draw the server-built plotly figures (dashboard/charts.py). */
(function () {
  "use strict";
  var source = document.getElementById("quota-figures");
  if (!source || !window.Plotly) return;
  var figures = JSON.parse(source.textContent);
  var config = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  Object.keys(figures).forEach(function (key) {
    var el = document.getElementById("chart-" + key);
    if (el) Plotly.newPlot(el, figures[key].data, figures[key].layout || {}, config);
  });
})();
