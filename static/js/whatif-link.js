/* "What if…" links on the Scale and Rebalance forms: open a new what-if prefilled with the
   change typed in the form (whatif/changes.py's prefill contract). */
(function () {
  "use strict";
  function value(form, selector) {
    var el = form.querySelector(selector);
    return el ? el.value : "";
  }
  function chosen(form, selector) {
    var el = form.querySelector(selector);
    return el && el.selectedIndex >= 0 ? el.options[el.selectedIndex].text : "";
  }
  document.querySelectorAll("a[data-whatif]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      var form = link.closest("form");
      if (!form) return;
      var quota = link.getAttribute("data-quota");
      var change;
      if (link.getAttribute("data-whatif") === "scale") {
        var box = form.querySelector("fieldset.amounts");
        var input = box && box.querySelector("input[name$='_min_gpu']");
        if (!input || input.value === "") return;
        change = { kind: "scale", quota: quota, gpus: Number(input.value) };
        var pool = box.getAttribute("data-testid").replace(/^amounts-/, "");
        if (pool) change.pool = pool;
      } else {
        var gpus = value(form, "[name='gpu']");
        var target = chosen(form, "[name='target']");
        if (!gpus || !target) return;
        change = { kind: "rebalance", from: quota, to: target, gpus: Number(gpus) };
      }
      event.preventDefault();
      window.location.href = link.getAttribute("href") + "&changes=" + encodeURIComponent(JSON.stringify([change]));
    });
  });
})();
