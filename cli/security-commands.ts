/**
 * `harvest security init` and `harvest security issue`: the cluster CA and the certificates of daemons (role daemon,
 * with the hosts they serve on) and people (role user or admin, their name in the subject; with a client bundle,
 * cli/client-bundle.ts).
 */
import type { Command } from "commander";
import { chmodSync, existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type * as CaModule from "../localcluster/cluster-ca.js";
import { HarvestError } from "../common/errors.js";
import { IDENTITY_ROLES } from "../common/tls.js";
import type { IdentityRole } from "../common/tls.js";
import { bundleCluster, bundleText, writeClientBundle } from "./client-bundle.js";
import { action, badFlag, positiveInt, print } from "./command-kit.js";

/** The certificate code (X.509), loaded by the commands that make certificates only: it is a large import. */
function caModule(): Promise<typeof CaModule> {
  return import("../localcluster/cluster-ca.js");
}

/** Adds `harvest security ...` to the program. */
export function registerSecurityCommands(program: Command): void {
  const security = program.command("security").description("the cluster CA and the certificates it issues");

  security
    .command("init")
    .description("create a cluster CA in --dir (ca.pem to share, ca-key.pem to keep secret)")
    .requiredOption("--dir <dir>", "where the CA lives (the key never leaves it)")
    .option("--days <n>", "validity of the CA certificate", "3650")
    .option("--json", "machine-readable output")
    .action(
      action(async (o: { dir: string; days: string; json?: boolean }) => {
        const { createCa } = await caModule();
        const files = await createCa(o.dir, { days: positiveInt(o.days, "--days") });
        print(o, files, () =>
          [
            `cluster CA created: ${files.cert}`,
            `  its key ${files.key} (mode 0600) signs every certificate: keep it on this machine only`,
            `next: harvest security issue --dir ${o.dir} --name <host> --role daemon --host <host or IP>`,
          ].join("\n"),
        );
      }),
    );

  security
    .command("issue")
    .description(
      "issue a certificate signed by the CA in --dir: for a daemon (--host ...), or for a person (user or admin) " +
        "with a client configuration beside it, one directory to hand over",
    )
    .requiredOption("--dir <dir>", "the CA's directory")
    .requiredOption("--name <name>", "the holder: a daemon's name (its node id) or a user's name")
    .requiredOption("--role <role>", `one of ${IDENTITY_ROLES.join(", ")}`)
    .option("--host <host...>", "host names and IPs a daemon serves on (its advertiseHost and any other name)")
    .option("--days <n>", "validity", "365")
    .option(
      "--out <dir>",
      "where to write <name>.pem and <name>-key.pem (default: a daemon's in the CA's directory, a person's in <dir>/users/<name>/)",
    )
    .option("--rm-address <host:port>", "a person's client configuration: the resource manager's advertised address")
    .option("--nn-address <host:port>", "a person's client configuration: the namenode's advertised address")
    .option(
      "--cluster <dir|file>",
      "a person's client configuration: the addresses of this cluster (a 'cluster up' directory or a client.json; " +
        "default: the cluster whose security/ is --dir, else the one harvest finds, if it trusts this CA)",
    )
    .option("--json", "machine-readable output")
    .action(
      action(
        async (o: {
          dir: string;
          name: string;
          role: string;
          host?: string[];
          days: string;
          out?: string;
          rmAddress?: string;
          nnAddress?: string;
          cluster?: string;
          json?: boolean;
        }) => {
          if (!IDENTITY_ROLES.includes(o.role as IdentityRole))
            throw new HarvestError("INVALID_ARGUMENT", `--role must be one of ${IDENTITY_ROLES.join(", ")}`);
          const person = o.role !== "daemon";
          const out = resolve(o.out ?? (person ? join(o.dir, "users", o.name) : o.dir));
          // Names that are file names of their own here: the CA's certificate, or a step out of the directory.
          if ([".", ".."].includes(o.name) || (o.name === "ca" && (person || out === resolve(o.dir))))
            badFlag("--name", `${JSON.stringify(o.name)} would overwrite or leave the CA's files: choose another name`);
          if (person && out === resolve(o.dir))
            badFlag("--out", `a person's files go to a directory to hand over, not the CA's (${o.dir} holds its key)`);
          const { caFiles, issueCertificate } = await caModule();
          const ca = caFiles(o.dir).cert;
          // Addresses first: a wrong flag fails before anything is written.
          const cluster = person ? bundleCluster(o, o.dir, ca) : undefined;
          const created = person && !existsSync(out);
          const files = await issueCertificate(o.dir, out, {
            name: o.name,
            role: o.role as IdentityRole,
            hosts: o.host ?? [],
            days: positiveInt(o.days, "--days"),
          });
          // A new bundle directory is its holder's alone: it holds the key.
          if (created) chmodSync(out, 0o700);
          const bundle = person ? writeClientBundle(out, files, ca, cluster) : undefined;
          const json = { ...files, ca: bundle?.ca ?? ca, name: o.name, role: o.role, hosts: o.host ?? [] };
          print(
            o,
            bundle ? { ...json, clientConfig: bundle.config ?? null, cluster: bundle.cluster ?? null } : json,
            () =>
              [
                `issued ${o.role} certificate for ${o.name}${o.host?.length ? ` (hosts ${o.host.join(", ")})` : ""}`,
                `  certificate ${files.cert}`,
                `  key         ${files.key} (mode 0600)`,
                `  CA          ${bundle?.ca ?? ca}`,
                ...(bundle ? bundleText(o.name, bundle) : []),
              ].join("\n"),
          );
        },
      ),
    );
}
