/**
 * The simulator's SVG plots: panels of grouped bars (ECharts rendered server-side), with ids renumbered so that a
 * plot's bytes depend on its data alone.
 */
import * as echarts from "echarts";
import { formatNumber } from "./report.js";
import type { RenderedPlot } from "./report.js";

/** One bar series of a panel: a value per category (undefined or NaN: no bar). */
export interface PlotSeries {
  name: string;
  values: readonly (number | undefined)[];
}

/**
 * One series per name, its values over `categories`: `value` of the result `find` gives for the name and category,
 * a gap where it gives none.
 */
export function seriesOver<N extends string, C, R>(
  names: readonly N[],
  categories: readonly C[],
  find: (name: N, category: C) => R | undefined,
  value: (r: R) => number,
): PlotSeries[] {
  return names.map((name) => ({
    name,
    values: categories.map((c) => {
      const r = find(name, c);
      return r ? value(r) : undefined;
    }),
  }));
}

/** One panel of grouped bars. */
export interface PlotPanel {
  /** Shown above the panel ("" for none). */
  title: string;
  categories: readonly string[];
  series: readonly PlotSeries[];
}

/** A figure of one or more panels of grouped bars side by side, sharing a legend. */
export interface BarPlotSpec {
  title: string;
  yName: string;
  panels: readonly PlotPanel[];
  /**
   * Log y axis: true, false, or "auto" (log when the values span more than two decades; zeros allowed).
   * @default false
   */
  log?: boolean | "auto";
  /**
   * One y range for every panel, so that bars compare across panels (replication 3 and 4); off when panels hold
   * figures of different magnitudes (job types).
   * @default false
   */
  sharedY?: boolean;
  /**
   * The figures are counts: no fractional ticks.
   * @default false
   */
  counts?: boolean;
  /** @default 360 px per panel, at least 640 */
  widthPx?: number;
  /** @default 420 */
  heightPx?: number;
}

/** Fixed colours so a policy looks the same in every plot: baselines grey, Harvest's policies blue and green. */
const SERIES_COLOURS: Record<string, string> = {
  stock: "#8c8c8c",
  "stock-unaware": "#c8c8c8",
  history: "#1f6fb4",
  diversity: "#2e9d4a",
};
const FALLBACK_COLOURS = ["#d9822b", "#8e44ad", "#c0392b", "#16a085"];

/**
 * The y scale of a figure. Counts that may be zero (blocks lost) go on a log axis of 1 + n, so a zero is a bar of no
 * height rather than a hole, and the bar labels still show n.
 */
function yScale(values: readonly number[], log: boolean | "auto"): { log: boolean; offset: number } {
  const min = Math.min(...values);
  const max = Math.max(...values);
  const wanted = log === "auto" ? values.length > 0 && min >= 0 && max / Math.max(min, 1) > 100 : log;
  if (!wanted) return { log: false, offset: 0 };
  return { log: true, offset: values.some((v) => v <= 0) ? 1 : 0 };
}

/** The smallest 1, 2, 2.5 or 5 x 10^k at least `v` (> 0): an axis maximum with round ticks. */
function niceCeil(v: number): number {
  const decade = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * decade >= v) return m * decade;
  return 10 * decade;
}

/** A compact bar label: 1234 -> "1,234", 1234567 -> "1.23M", 12.345 -> "12.3". */
function barLabel(v: number): string {
  if (Math.abs(v) >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  return formatNumber(v, Number.isInteger(v) || Math.abs(v) >= 100 ? 0 : 1);
}

/** Renders grouped bar panels as an SVG document with ECharts' server-side SVG renderer. */
export function renderBarPanels(spec: BarPlotSpec): string {
  const n = Math.max(1, spec.panels.length);
  const width = spec.widthPx ?? Math.max(640, 360 * n);
  const height = spec.heightPx ?? 420;
  const names = [...new Set(spec.panels.flatMap((p) => p.series.map((s) => s.name)))];
  const colour = (name: string): string =>
    SERIES_COLOURS[name] ?? FALLBACK_COLOURS[names.indexOf(name) % FALLBACK_COLOURS.length]!;
  // Panels share the width: room on the left of each for the y axis labels and its rotated name.
  const panelPx = width / n;
  const top = spec.panels.some((p) => p.title) ? 116 : 84;
  const grids = spec.panels.map((_, i) => ({ left: i * panelPx + 86, width: panelPx - 110, top, bottom: 40 }));
  const values = spec.panels.flatMap((p) =>
    p.series.flatMap((s) => s.values.filter((v): v is number => v !== undefined && Number.isFinite(v))),
  );
  // One scale for the whole figure: panels side by side on different scales would mislead.
  const { log, offset } = yScale(values, spec.log ?? false);
  const yName = !log ? spec.yName : offset > 0 ? `1 + ${spec.yName} (log scale)` : `${spec.yName} (log scale)`;
  const highest = values.length > 0 ? Math.max(...values) + offset : 0;
  const sharedMax =
    spec.sharedY && highest > 0 ? (log ? 10 ** Math.ceil(Math.log10(highest)) : niceCeil(highest)) : undefined;
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width, height });
  try {
    chart.setOption({
      animation: false,
      backgroundColor: "#ffffff",
      textStyle: { fontFamily: "sans-serif" },
      title: [
        { text: spec.title, left: "center", top: 8, textStyle: { fontSize: 15 } },
        ...spec.panels.map((p, i) => ({
          text: p.title,
          left: i * panelPx + 86 + (panelPx - 110) / 2,
          textAlign: "center" as const,
          top: 70,
          textStyle: { fontSize: 12, fontWeight: "normal" as const },
        })),
      ],
      legend: { top: 36, itemGap: 24, data: names },
      grid: grids,
      xAxis: spec.panels.map((p, i) => ({ type: "category" as const, gridIndex: i, data: [...p.categories] })),
      yAxis: spec.panels.map((_, i) => ({
        type: log ? ("log" as const) : ("value" as const),
        gridIndex: i,
        ...(log ? { logBase: 10, ...(offset > 0 ? { min: 1 } : {}) } : { min: 0 }),
        ...(sharedMax !== undefined ? { max: sharedMax } : {}),
        ...(spec.counts ? { minInterval: 1 } : {}),
        name: yName,
        nameLocation: "middle" as const,
        nameGap: 62,
        nameTextStyle: { fontSize: 11 },
      })),
      series: spec.panels.flatMap((p, i) =>
        p.series.map((s) => ({
          type: "bar" as const,
          name: s.name,
          xAxisIndex: i,
          yAxisIndex: i,
          itemStyle: { color: colour(s.name) },
          label: {
            show: true,
            position: "top" as const,
            fontSize: 10,
            formatter: (param: { value: unknown }) =>
              typeof param.value === "number" ? barLabel(param.value - offset) : "",
          },
          data: s.values.map((v) => (v !== undefined && Number.isFinite(v) ? v + offset : null)),
        })),
      ),
    });
    return stableIds(chart.renderToSVGString());
  } finally {
    chart.dispose();
  }
}

/**
 * ECharts names the CSS classes and ids of an SVG ("zr7-cls-26") from counters global to the process; renumbering
 * them by first appearance makes a plot's bytes depend on its data alone.
 */
export function stableIds(svg: string): string {
  const ids = new Map<string, string>();
  return svg.replace(/\bzr\d+-([a-z]+)-(\d+)\b/g, (id, kind: string) => {
    let stable = ids.get(id);
    if (stable === undefined) {
      stable = `zr-${kind}-${ids.size}`;
      ids.set(id, stable);
    }
    return stable;
  });
}

/** A report's bar plot: `renderBarPanels(spec)` under `spec.title`, written as `<report>-<suffix>.svg`. */
export function barPlot(suffix: string, spec: BarPlotSpec): RenderedPlot {
  return { suffix, title: spec.title, svg: renderBarPanels(spec) };
}
