/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests that scrape `/metrics`: every
 * line must be a comment (`# HELP`, `# TYPE` or other), blank, or a sample `name{label="value",...} value [timestamp]`.
 */

/** One sample: its labels and value. */
export interface PromSample {
  labels: Record<string, string>;
  value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

/** Parses exposition text into samples keyed by sample name (`foo_total`, `bar_bucket`); throws on a malformed line. */
export function parsePromText(text: string): Map<string, PromSample[]> {
  const out = new Map<string, PromSample[]>();
  text.split("\n").forEach((line, i) => {
    const where = `line ${i + 1} (${JSON.stringify(line)})`;
    if (line.trim() === "") return;
    if (line.startsWith("#")) {
      checkComment(line, where);
      return;
    }
    const { name, labels, rest } = parseSeries(line, where);
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || fields[0] === "") throw new Error(`${where}: expected a value`);
    const value = parseValue(fields[0]!, where);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`${where}: bad timestamp`);
    const list = out.get(name) ?? [];
    list.push({ labels, value });
    out.set(name, list);
  });
  return out;
}

/** The sum of a sample's values over every series (optionally only those whose labels include `match`). */
export function sumSamples(
  samples: Map<string, PromSample[]>,
  name: string,
  match: Record<string, string> = {},
): number {
  let total = 0;
  for (const s of samples.get(name) ?? [])
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
  return total;
}

function checkComment(line: string, where: string): void {
  const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
  if (!m) return; // Any other comment is allowed.
  if (!NAME.test(m[2]!)) throw new Error(`${where}: bad metric name`);
  if (m[1] === "TYPE" && !TYPES.has(m[3] ?? "")) throw new Error(`${where}: unknown type`);
}

function parseSeries(line: string, where: string): { name: string; labels: Record<string, string>; rest: string } {
  const nameEnd = line.search(/[{\s]/);
  if (nameEnd <= 0) throw new Error(`${where}: expected a sample`);
  const name = line.slice(0, nameEnd);
  if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
  const labels: Record<string, string> = {};
  let at = nameEnd;
  if (line[at] === "{") {
    at++;
    for (;;) {
      if (line[at] === "}") {
        at++;
        break;
      }
      const eq = line.indexOf("=", at);
      if (eq < 0) throw new Error(`${where}: expected label="value"`);
      const labelName = line.slice(at, eq).trim();
      if (!LABEL_NAME.test(labelName)) throw new Error(`${where}: bad label name ${JSON.stringify(labelName)}`);
      if (line[eq + 1] !== '"') throw new Error(`${where}: label value must be quoted`);
      let value = "";
      let j = eq + 2;
      for (;;) {
        const ch = line[j];
        if (ch === undefined) throw new Error(`${where}: unterminated label value`);
        if (ch === '"') break;
        if (ch === "\\") {
          const next = line[j + 1];
          if (next === "n") value += "\n";
          else if (next === "\\" || next === '"') value += next;
          else throw new Error(`${where}: bad escape in label value`);
          j += 2;
        } else {
          value += ch;
          j++;
        }
      }
      if (labelName in labels) throw new Error(`${where}: label ${labelName} twice`);
      labels[labelName] = value;
      at = j + 1;
      if (line[at] === ",") at++;
      else if (line[at] !== "}") throw new Error(`${where}: expected , or } after a label`);
    }
  }
  if (!/^\s/.test(line.slice(at))) throw new Error(`${where}: expected a space before the value`);
  return { name, labels, rest: line.slice(at) };
}

/** A sample value, as Prometheus reads it (Go's ParseFloat: NaN and Inf in any case; prom-client writes "Nan"). */
function parseValue(text: string, where: string): number {
  const lower = text.toLowerCase();
  if (lower === "nan") return NaN;
  if (lower === "+inf" || lower === "inf") return Infinity;
  if (lower === "-inf") return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`${where}: bad value ${text}`);
  return Number(text);
}
