/**
 * `harvest security init` and `harvest security issue`: the cluster CA and the certificates of daemons (role daemon,
 * with the hosts they serve on) and people (role user or admin, their name in the subject).
 */
import type { Command } from "commander";
import type * as CaModule from "../localcluster/cluster-ca.js";
import { HarvestError } from "../common/errors.js";
import { IDENTITY_ROLES } from "../common/tls.js";
import type { IdentityRole } from "../common/tls.js";
import { action, positiveInt, print } from "./command-kit.js";

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
    .description("issue a certificate signed by the CA in --dir: for a daemon (--host ...) or a user or admin")
    .requiredOption("--dir <dir>", "the CA's directory")
    .requiredOption("--name <name>", "the holder: a daemon's name (its node id) or a user's name")
    .requiredOption("--role <role>", `one of ${IDENTITY_ROLES.join(", ")}`)
    .option("--host <host...>", "host names and IPs a daemon serves on (its advertiseHost and any other name)")
    .option("--days <n>", "validity", "365")
    .option("--out <dir>", "where to write <name>.pem and <name>-key.pem (default: the CA's directory)")
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
          json?: boolean;
        }) => {
          if (!IDENTITY_ROLES.includes(o.role as IdentityRole))
            throw new HarvestError("INVALID_ARGUMENT", `--role must be one of ${IDENTITY_ROLES.join(", ")}`);
          const { caFiles, issueCertificate } = await caModule();
          const files = await issueCertificate(o.dir, o.out ?? o.dir, {
            name: o.name,
            role: o.role as IdentityRole,
            hosts: o.host ?? [],
            days: positiveInt(o.days, "--days"),
          });
          print(o, { ...files, ca: caFiles(o.dir).cert, name: o.name, role: o.role, hosts: o.host ?? [] }, () =>
            [
              `issued ${o.role} certificate for ${o.name}${o.host?.length ? ` (hosts ${o.host.join(", ")})` : ""}`,
              `  certificate ${files.cert}`,
              `  key         ${files.key} (mode 0600)`,
              `  CA          ${caFiles(o.dir).cert}`,
            ].join("\n"),
          );
        },
      ),
    );
}
