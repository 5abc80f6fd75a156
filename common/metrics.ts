/**
 * Prometheus metrics (prom-client): one registry per daemon (tests run several daemons in one process), the Node.js
 * process metrics in it, and the gRPC server's calls by service, method and outcome. Daemons add their own metrics to
 * their registry; `WebServer` serves it at `/metrics`. Metric names are `harvest_<daemon>_<what>` with units in the
 * name (`_seconds`, `_bytes`, `_watts`) and `_total` on counters; the README lists them.
 */
import * as grpc from "@grpc/grpc-js";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

/** The daemons that serve metrics. */
export type MetricsDaemon = "resourcemanager" | "nodemanager" | "namenode" | "datanode" | "jobmanager";

/** A daemon's registry, with the process metrics and `daemon` (and `node`, the server, when given) on every series; not `instance`, which Prometheus sets itself when it scrapes. */
export function daemonRegistry(daemon: MetricsDaemon, node?: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels(node ? { daemon, node } : { daemon });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** A counter in `registry`, with `labelNames` when it has labels. */
export function counter<L extends string = string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[] = [],
): Counter<L> {
  return new Counter<L>({ name, help, labelNames, registers: [registry] });
}

/** A gauge without labels whose value `read` gives at each scrape (so it cannot drift from the live state). */
export function scrapedGauge(registry: Registry, name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    collect(this: Gauge) {
      this.set(read());
    },
  });
}

/**
 * A maker of unlabelled gauges that read one subject fetched at each scrape (a summary, a store); each reads 0 while
 * `subject` gives undefined (before the daemon has opened what it reads).
 */
export function subjectGauges<S>(
  registry: Registry,
  subject: () => S | undefined,
): (name: string, help: string, read: (s: S) => number) => Gauge {
  return (name, help, read) =>
    scrapedGauge(registry, name, help, () => {
      const s = subject();
      return s === undefined ? 0 : read(s);
    });
}

/**
 * A gauge whose series `read` gives at each scrape, all of them: the previous scrape's series are dropped first, so a
 * label value that is gone (a state no node is in any more, a domain removed) leaves with it.
 */
export function scrapedSeriesGauge<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  read: () => Iterable<readonly [Partial<Record<L, string>>, number]>,
): Gauge<L> {
  return new Gauge<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    collect(this: Gauge<L>) {
      this.reset();
      for (const [labels, value] of read()) this.set(labels, value);
    },
  });
}

/** A gauge with one label: at each scrape, one series per key of what `read` gives (in its order). */
export function scrapedLabelledGauge<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  label: L,
  read: () => Readonly<Record<string, number>>,
): Gauge<L> {
  return scrapedSeriesGauge(registry, name, help, [label], () =>
    Object.entries(read()).map(([value, n]) => [{ [label]: value } as Partial<Record<L, string>>, n] as const),
  );
}

/** Latency buckets in seconds, from a millisecond to a minute. */
export const LATENCY_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * A gRPC server interceptor that counts every call by service, method, gRPC code and Harvest error code, and times
 * it (`harvest_grpc_server_handled_total`, `harvest_grpc_server_handling_seconds`), in the shape of go-grpc-prometheus.
 */
export function grpcServerMetrics(registry: Registry): grpc.ServerInterceptor {
  const handled = new Counter({
    name: "harvest_grpc_server_handled_total",
    help: "gRPC calls served, by service, method, gRPC status code and Harvest error code (empty when OK)",
    labelNames: ["service", "method", "code", "harvest_code"],
    registers: [registry],
  });
  const seconds = new Histogram({
    name: "harvest_grpc_server_handling_seconds",
    help: "Time from a gRPC call's start to its status, by service and method",
    labelNames: ["service", "method"],
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [registry],
  });
  return (method, call) => {
    const started = process.hrtime.bigint();
    const slash = method.path.lastIndexOf("/");
    const service = method.path.slice(1, slash).replace(/^harvest\.v1\./, "");
    const name = method.path.slice(slash + 1);
    return new grpc.ServerInterceptingCall(call, {
      sendStatus: (status, next) => {
        const harvestCode = status.metadata?.get("harvest-code")[0];
        handled.inc({
          service,
          method: name,
          code: grpc.status[status.code] ?? String(status.code),
          harvest_code: typeof harvestCode === "string" ? harvestCode : "",
        });
        seconds.observe({ service, method: name }, Number(process.hrtime.bigint() - started) / 1e9);
        next(status);
      },
    });
  };
}
