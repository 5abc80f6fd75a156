/** The compute sweep's heat maps (load x utilization) as SVG: server-side ECharts, stable ids. */
import * as echarts from "echarts";
import { stableIds } from "../../plots.js";

/** What one heat map shows. */
export interface HeatMap {
  title: string;
  /** Column labels (the utilization levels) and row labels (the loads). */
  columns: readonly string[];
  rows: readonly string[];
  /** The value of row y, column x (`values[y][x]`); undefined leaves the cell blank ("-"). */
  values: readonly (readonly (number | undefined)[])[];
  /** Each cell's label, from its value. */
  label: (v: number) => string;
  /** The colour scale's ends; a value beyond one is coloured as that end and labelled with its own value. */
  min: number;
  max: number;
  /** Colours from `min` to `max`. */
  colors: readonly string[];
  /** The legend's texts at `max` and at `min`. */
  legend: readonly [string, string];
}

/** `map` rendered as SVG (720 x 480). */
export function heatMapSvg(map: HeatMap): string {
  const data: [number, number, number | string, string][] = [];
  map.rows.forEach((_, y) =>
    map.columns.forEach((_c, x) => {
      const v = map.values[y]?.[x];
      const shown = v !== undefined && Number.isFinite(v);
      data.push([x, y, shown ? Math.min(map.max, Math.max(map.min, v)) : "-", shown ? map.label(v) : "-"]);
    }),
  );
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width: 720, height: 480 });
  try {
    chart.setOption({
      animation: false,
      backgroundColor: "#ffffff",
      textStyle: { fontFamily: "sans-serif" },
      title: { text: map.title, left: "center", top: 8 },
      grid: { left: 90, right: 110, top: 60, bottom: 60 },
      xAxis: {
        type: "category",
        name: "average primary utilization",
        nameLocation: "middle",
        nameGap: 32,
        data: [...map.columns],
      },
      yAxis: { type: "category", name: "offered load", nameLocation: "middle", nameGap: 56, data: [...map.rows] },
      visualMap: {
        min: map.min,
        max: map.max,
        dimension: 2,
        calculable: false,
        orient: "vertical",
        right: 10,
        top: "middle",
        inRange: { color: [...map.colors] },
        text: [...map.legend],
      },
      series: [
        {
          type: "heatmap",
          data,
          label: { show: true, formatter: (p: { value: unknown[] }) => String(p.value[3]) },
        },
      ],
    });
    return stableIds(chart.renderToSVGString());
  } finally {
    chart.dispose();
  }
}
