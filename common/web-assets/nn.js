// The namenode's pages: draws the replica placement grid (page data `placement`, namenode/web.ts) as a heatmap when
// the page loaded the charting library first. The grid table on the page says the same; the chart is an extra.
(function () {
  "use strict";
  var dataBlock = document.getElementById("page-data");
  if (!dataBlock) return;
  var data;
  try {
    data = JSON.parse(dataBlock.textContent || "null");
  } catch (e) {
    return;
  }
  if (data && data.placement) drawPlacement(data.placement);

  function drawPlacement(placement) {
    var box = document.getElementById("placement-chart");
    if (!box || typeof window.echarts === "undefined" || !Array.isArray(placement.rows)) return;
    var tiers = ["low", "medium", "high"];
    var cells = [];
    var detail = {};
    var max = 0;
    placement.rows.forEach(function (row) {
      row.cells.forEach(function (cell) {
        cells.push([cell.col, cell.row, cell.replicas]);
        detail[cell.col + "," + cell.row] = cell.tenants.length + " tenants, " + cell.servers + " servers";
        if (cell.replicas > max) max = cell.replicas;
      });
    });
    var chart = window.echarts.init(box, null, { renderer: "canvas" });
    chart.setOption({
      animation: false,
      // Drawn on the canvas: an HTML tooltip would carry inline styles, which the pages' CSP refuses.
      tooltip: {
        renderMode: "richText",
        formatter: function (p) {
          var v = p.value;
          var more = detail[v[0] + "," + v[1]] || "";
          return tiers[v[1]] + " reimage rate, " + tiers[v[0]] + " peak CPU: " + v[2] + " replicas, " + more;
        },
      },
      grid: { left: 150, right: 30, top: 16, bottom: 80 },
      xAxis: {
        type: "category",
        data: tiers.map(function (t) {
          return t + " peak CPU";
        }),
        splitArea: { show: true },
      },
      yAxis: {
        type: "category",
        data: tiers.map(function (t) {
          return t + " reimage rate";
        }),
        splitArea: { show: true },
      },
      visualMap: {
        min: 0,
        max: Math.max(1, max),
        dimension: 2,
        calculable: false,
        orient: "horizontal",
        left: "center",
        bottom: 8,
        inRange: { color: ["#f2f4f7", "#2f6f3e"] },
      },
      series: [{ name: "replicas", type: "heatmap", data: cells, label: { show: true } }],
    });
    window.addEventListener("resize", function () {
      chart.resize();
    });
  }
})();
