// The resource manager's charts (resourcemanager/web-pages.ts): reads the page's #page-data and draws with echarts,
// which /assets/echarts.min.js loads before this file. Plain ES5, no modules. Every chart copes with empty data (a page
// must never log a console error), renders to canvas, and keeps its tooltips in the canvas (richText): the pages' CSP
// refuses the inline styles of echarts' HTML tooltips.
(function () {
  "use strict";
  var PRIMARY = "#f79009";
  var HARVEST = "#2f6f3e";
  var MUTED = "#98a2b3";
  var charts = [];

  function pageData() {
    var el = document.getElementById("page-data");
    if (!el) return null;
    try {
      return JSON.parse(el.textContent || "null");
    } catch (e) {
      return null;
    }
  }

  function chartOn(id) {
    var el = document.getElementById(id);
    if (!el || typeof echarts === "undefined") return null;
    var chart = echarts.init(el, null, { renderer: "canvas" });
    charts.push(chart);
    return chart;
  }

  function list(v) {
    return Array.isArray(v) ? v : [];
  }

  function pairs(times, values) {
    var out = [];
    var n = Math.min(list(times).length, list(values).length);
    for (var i = 0; i < n; i++) out.push([times[i], values[i]]);
    return out;
  }

  var TOOLTIP = { trigger: "axis", renderMode: "richText" };

  // Cluster page: one sparkline per server, primary and Harvest stacked, in percent of its cores.
  function sparks(data) {
    list(data.sparks).forEach(function (s) {
      var chart = chartOn(s.id);
      if (!chart) return;
      var area = function (name, colour, values) {
        return {
          name: name,
          type: "line",
          stack: "use",
          showSymbol: false,
          silent: true,
          lineStyle: { width: 1, color: colour },
          itemStyle: { color: colour },
          areaStyle: { color: colour, opacity: 0.35 },
          data: pairs(s.timesMs, values),
        };
      };
      chart.setOption({
        animation: false,
        grid: { left: 0, right: 0, top: 2, bottom: 2 },
        xAxis: { type: "time", show: false },
        yAxis: { type: "value", min: 0, max: 100, show: false },
        series: [area("primary", PRIMARY, s.primaryPct), area("Harvest", HARVEST, s.harvestPct)],
      });
    });
  }

  // Job page: the DAG, one column per layer, each vertex coloured by its progress.
  function dag(data) {
    var d = data.dag || {};
    var vertices = list(d.vertices);
    var chart = chartOn("dag");
    if (!chart) return;
    if (vertices.length === 0) {
      chart.setOption({
        title: {
          text: "no vertices reported yet",
          left: "center",
          top: "middle",
          textStyle: { color: MUTED, fontSize: 13 },
        },
      });
      return;
    }
    var perLevel = {};
    vertices.forEach(function (v) {
      perLevel[v.level] = Math.max(perLevel[v.level] || 0, v.row + 1);
    });
    var nodes = vertices.map(function (v) {
      var done = v.total > 0 ? v.succeeded / v.total : 0;
      var colour =
        v.state === "FAILED" || v.state === "KILLED"
          ? "#b42318"
          : done >= 1
            ? HARVEST
            : v.running > 0
              ? "#1570ef"
              : MUTED;
      return {
        name: v.name,
        x: v.level * 220,
        y: (v.row - (perLevel[v.level] - 1) / 2) * 110,
        symbolSize: 28 + Math.min(30, Math.sqrt(Math.max(1, v.total)) * 4),
        itemStyle: { color: colour },
        label: {
          show: true,
          position: "bottom",
          lineHeight: 15,
          fontSize: 12,
          formatter:
            v.name + "\n" + v.succeeded + "/" + v.total + (v.running > 0 ? " (" + v.running + " running)" : ""),
        },
      };
    });
    // Edge labels in dark text on a light box, so that they stay readable over the edges and the grid.
    var links = list(d.edges).map(function (e) {
      return {
        source: e.from,
        target: e.to,
        label: {
          show: true,
          formatter: e.type,
          fontSize: 12,
          color: "#1d2939",
          backgroundColor: "#ffffff",
          borderColor: "#d0d5dd",
          borderWidth: 1,
          borderRadius: 3,
          padding: [2, 4],
        },
      };
    });
    chart.setOption({
      animation: false,
      tooltip: { renderMode: "richText" },
      series: [
        {
          type: "graph",
          layout: "none",
          roam: true,
          edgeSymbol: ["none", "arrow"],
          edgeSymbolSize: 9,
          // Opaque: a graph's edges default to half opacity, which their labels inherit.
          lineStyle: { color: "#98a2b3", width: 2, opacity: 1 },
          edgeLabel: { show: true },
          data: nodes,
          links: links,
        },
      ],
    });
  }

  // Tenants page: 30 days of hourly means and the daily profile of each tenant.
  function tenants(data) {
    list(data.tenants).forEach(function (t) {
      var history = chartOn("tenant-history-" + t.id);
      var h = t.history || {};
      if (history) {
        history.setOption({
          animation: false,
          title: { text: "hourly utilization, last 30 days", textStyle: { fontSize: 12 } },
          tooltip: TOOLTIP,
          grid: { left: 44, right: 16, top: 36, bottom: 28 },
          xAxis: { type: "time" },
          yAxis: { type: "value", min: 0, max: 100, name: "CPU %" },
          series: [
            {
              name: "CPU %",
              type: "line",
              showSymbol: false,
              lineStyle: { width: 1, color: PRIMARY },
              itemStyle: { color: PRIMARY },
              data: pairs(h.timesMs, h.cpuPct),
            },
          ],
        });
      }
      var profile = chartOn("tenant-profile-" + t.id);
      if (profile) {
        var hours = [];
        for (var i = 0; i < 24; i++) hours.push(String(i));
        profile.setOption({
          animation: false,
          title: { text: "daily profile: mean by hour of day (UTC)", textStyle: { fontSize: 12 } },
          tooltip: TOOLTIP,
          grid: { left: 44, right: 16, top: 36, bottom: 28 },
          xAxis: { type: "category", data: hours },
          yAxis: { type: "value", min: 0, max: 100, name: "CPU %" },
          series: [{ name: "CPU %", type: "bar", itemStyle: { color: PRIMARY }, data: list(t.profile) }],
        });
      }
    });
  }

  // Classes page: average, peak and current utilization of each class, side by side.
  function classes(data) {
    var cls = list(data.classes);
    var chart = chartOn("classes-chart");
    if (!chart) return;
    var ids = cls.map(function (c) {
      return c.id;
    });
    var series = function (name, key, colour) {
      return {
        name: name,
        type: "bar",
        itemStyle: { color: colour },
        data: cls.map(function (c) {
          return c[key];
        }),
      };
    };
    chart.setOption({
      animation: false,
      tooltip: TOOLTIP,
      legend: { top: 4 },
      grid: { left: 44, right: 16, top: 36, bottom: 28 },
      xAxis: { type: "category", data: ids },
      yAxis: { type: "value", min: 0, max: 100, name: "CPU %" },
      series: [
        series("average", "average", PRIMARY),
        series("peak", "peak", "#fec84b"),
        series("now", "current", HARVEST),
      ],
    });
  }

  // Cluster page: the last day's cores (harvested, the primaries', total) and kills per hour.
  function clusterHistory(data) {
    var h = data.history || {};
    var samples = list(h.samples);
    var at = function (key) {
      return samples.map(function (s) {
        return [s.timeMs, Math.round(s[key] / 100) / 10];
      });
    };
    var coresChart = chartOn("history-cores");
    if (coresChart) {
      coresChart.setOption({
        animation: false,
        title: { text: "cores, last day", textStyle: { fontSize: 12 } },
        tooltip: TOOLTIP,
        legend: { top: 0, right: 16 },
        grid: { left: 44, right: 16, top: 36, bottom: 28 },
        xAxis: { type: "time" },
        yAxis: { type: "value", min: 0, name: "cores" },
        series: [
          line("harvested", HARVEST, at("harvestedMilli"), true),
          line("primary", PRIMARY, at("primaryMilli"), true),
          line("total", MUTED, at("capacityMilli"), false),
        ],
      });
    }
    var killsChart = chartOn("history-kills");
    if (killsChart) {
      var hours = list(h.killsPerHour);
      killsChart.setOption({
        animation: false,
        title: { text: "containers killed per hour (UTC)", textStyle: { fontSize: 12 } },
        tooltip: TOOLTIP,
        grid: { left: 44, right: 16, top: 36, bottom: 28 },
        xAxis: {
          type: "category",
          data: hours.map(function (k) {
            return new Date(k.hourMs).toISOString().slice(11, 13) + ":00";
          }),
        },
        yAxis: { type: "value", min: 0, minInterval: 1, name: "kills" },
        series: [
          {
            name: "kills",
            type: "bar",
            itemStyle: { color: "#b42318" },
            data: hours.map(function (k) {
              return k.kills;
            }),
          },
        ],
      });
    }
  }

  function line(name, colour, points, area) {
    return {
      name: name,
      type: "line",
      showSymbol: points.length < 3,
      lineStyle: { width: 1.5, color: colour },
      itemStyle: { color: colour },
      areaStyle: area ? { color: colour, opacity: 0.15 } : undefined,
      data: points,
    };
  }

  // Server page: its primary over the last day with its class's peak, and its last heartbeats.
  function node(data) {
    var u = data.utilization || {};
    var chart = chartOn("node-utilization");
    if (chart) {
      var primary = line("primary CPU %", PRIMARY, pairs(u.timesMs, u.cpuPct), true);
      if (typeof data.classPeakPct === "number") {
        primary.markLine = {
          silent: true,
          symbol: "none",
          lineStyle: { color: "#b42318", type: "dashed" },
          label: {
            position: "insideEndTop",
            color: "#b42318",
            formatter: "class " + data.classId + " peak " + Math.round(data.classPeakPct) + "%",
          },
          data: [{ yAxis: data.classPeakPct }],
        };
      }
      var empty = list(u.timesMs).length === 0;
      chart.setOption({
        animation: false,
        title: {
          text: empty ? "no stored utilization for this server in the last day" : "primary utilization, last day",
          textStyle: { fontSize: 12, color: empty ? MUTED : "#1d2939" },
        },
        tooltip: TOOLTIP,
        grid: { left: 44, right: 16, top: 36, bottom: 28 },
        xAxis: { type: "time", min: Date.now() - 86400000, max: Date.now() },
        yAxis: { type: "value", min: 0, max: 100, name: "CPU %" },
        series: [primary],
      });
    }
    var recent = chartOn("node-recent");
    var r = data.recent || {};
    if (recent) {
      recent.setOption({
        animation: false,
        tooltip: TOOLTIP,
        legend: { top: 0, right: 16 },
        grid: { left: 44, right: 16, top: 28, bottom: 28 },
        xAxis: { type: "time" },
        yAxis: { type: "value", min: 0, max: 100, name: "% of cores" },
        series: [
          line("primary", PRIMARY, pairs(r.timesMs, r.primaryPct), true),
          line("harvested", HARVEST, pairs(r.timesMs, r.harvestPct), true),
        ],
      });
    }
  }

  var data = pageData();
  if (!data || typeof echarts === "undefined") return;
  if (data.kind === "cluster") {
    sparks(data);
    clusterHistory(data);
  } else if (data.kind === "node") node(data);
  else if (data.kind === "job") dag(data);
  else if (data.kind === "tenants") tenants(data);
  else if (data.kind === "classes") classes(data);
  window.addEventListener("resize", function () {
    charts.forEach(function (c) {
      c.resize();
    });
  });
})();
