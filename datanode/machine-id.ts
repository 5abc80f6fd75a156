/**
 * Which machine a datanode runs on, so that the namenode counts a file system shared by several datanodes (a local
 * cluster's datanodes on one disk) once: systemd's /etc/machine-id (or D-Bus's copy), else the host name.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

const MACHINE_ID_FILES = ["/etc/machine-id", "/var/lib/dbus/machine-id"] as const;

let cached: string | undefined;

/** This machine's id: the first non-empty line of /etc/machine-id or /var/lib/dbus/machine-id, else `host:<name>`. */
export function machineId(files: readonly string[] = MACHINE_ID_FILES): string {
  if (cached !== undefined && files === MACHINE_ID_FILES) return cached;
  let id = "";
  for (const f of files) {
    try {
      id = readFileSync(f, "utf8").trim().split("\n")[0]?.trim() ?? "";
    } catch {
      id = "";
    }
    if (id) break;
  }
  const out = id || `host:${hostname()}`;
  if (files === MACHINE_ID_FILES) cached = out;
  return out;
}

/** A file system's id on this machine from its device id (`stat().dev`), as the datanode reports it. */
export function fileSystemId(device: number): string {
  return `dev:${device}`;
}
