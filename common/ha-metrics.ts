/** A highly available master's role and term as Prometheus gauges (served at `/metrics` by the active and the standby). */
import { Gauge } from "prom-client";
import type { Registry } from "prom-client";
import type { HaStatus } from "../proto/generated/harvest/v1/HaStatus.js";

/** The `harvest_ha_active` (1 active, 0 not) and `harvest_ha_epoch` gauges of a master, read at each scrape. */
export function haGauges(registry: Registry, status: () => HaStatus): void {
  new Gauge({
    name: "harvest_ha_active",
    help: "1 while this master is its service's active one (or is not highly available), 0 while standby",
    registers: [registry],
    collect() {
      const role = status().role;
      this.set(role === "active" || role === "none" ? 1 : 0);
    },
  });
  new Gauge({
    name: "harvest_ha_epoch",
    help: "The active term this master serves in, or the last it saw while standby (0: none, or not highly available)",
    registers: [registry],
    collect() {
      this.set(Number(status().epoch ?? 0));
    },
  });
}
