/**
 * `harvest ui login`: the web UIs of the resource manager and the namenode. On a secure cluster a
 * browser holds no certificate, so `ui login` asks each daemon (GetWebToken, over mutual TLS with the user's
 * certificate) for a short-lived token naming the user and role, and prints a login URL per daemon that sets it as an
 * HttpOnly cookie. Scripts may send the same token as `Authorization: Bearer <token>`.
 */
import type { Command } from "commander";
import { HarvestError } from "../common/errors.js";
import { action, clusterTarget, common, durationFlagMs, print, withClient, withDfs } from "./command-kit.js";
import type { GlobalOpts } from "./command-kit.js";
import type { WebTokenResponseOutput } from "../proto/generated/harvest/v1/WebTokenResponse.js";

/** One daemon's web entry point for the user. */
interface WebLogin {
  daemon: "resourcemanager" | "namenode";
  url: string;
  /** Opens the UI logged in (sets the cookie); the bare URL on an insecure cluster. */
  loginUrl: string;
  token: string;
  owner: string;
  role: string;
  expiresMs: number;
}

function loginOf(daemon: WebLogin["daemon"], r: WebTokenResponseOutput): WebLogin {
  if (!r.url) throw new HarvestError("UNAVAILABLE", `the ${daemon} serves no web UI`);
  const loginUrl = r.token ? `${r.url}/login?token=${encodeURIComponent(r.token)}` : `${r.url}/`;
  return { daemon, url: r.url, loginUrl, token: r.token, owner: r.owner, role: r.role, expiresMs: Number(r.expiresMs) };
}

/** Asks the resource manager and (when the cluster has one) the namenode for web tokens. */
export async function webLogins(o: GlobalOpts, lifetimeMs: number): Promise<WebLogin[]> {
  const target = clusterTarget(o);
  const out: WebLogin[] = [];
  if (target.rmAddress) out.push(loginOf("resourcemanager", await withClient(o, (c) => c.webToken(lifetimeMs))));
  if (target.nnAddress) out.push(loginOf("namenode", await withDfs(o, (c) => c.webToken(lifetimeMs))));
  return out;
}

/** Adds `harvest ui ...` to the program. */
export function registerUiCommands(program: Command): void {
  const ui = program.command("ui").description("the web UIs of the resource manager and the namenode");

  common(ui.command("login"))
    .description(
      "print login URLs for the web UIs: each sets a short-lived token for your certificate's name and role in the browser",
    )
    .option("--lifetime <duration>", "how long the token lasts (at most the daemon's maximum, 12h)", "8h")
    .action(
      action(async (o: GlobalOpts & { lifetime: string }) => {
        const logins = await webLogins(o, durationFlagMs(o.lifetime, "--lifetime"));
        print(o, { logins }, () =>
          [
            ...logins.map((l) => `${l.daemon.padEnd(16)} ${l.loginUrl}`),
            logins.some((l) => l.token)
              ? `as ${logins[0]!.owner} (${logins[0]!.role}) until ${new Date(logins[0]!.expiresMs).toISOString()}; ` +
                "the token is a password until then: do not share the URL. Scripts: curl --cacert <ca.pem> -H 'Authorization: Bearer <token>' <url>/ws/v1/cluster/info"
              : "insecure cluster: the pages need no login",
          ].join("\n"),
        );
      }),
    );
}
