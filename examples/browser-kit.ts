/**
 * Driving a real browser at Harvest's web UIs (the browser tests and `npm run screenshots`): Debian's Chromium,
 * headless, through puppeteer-core (never a downloaded browser). The browser trusts exactly the daemons' own
 * certificates (their public keys' SHA-256, `--ignore-certificate-errors-spki-list`), since a throwaway profile holds
 * no cluster CA; the TLS itself is real. Every console error and uncaught page error is collected.
 */
import { createHash, X509Certificate } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import type { Browser, Page } from "puppeteer-core";

/** Where Chromium is: $HARVEST_CHROMIUM, else the usual Debian and Chrome paths; undefined when there is none. */
export function findChromium(): string | undefined {
  const candidates = [
    process.env["HARVEST_CHROMIUM"],
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
  ];
  return candidates.find((p): p is string => typeof p === "string" && p.length > 0 && existsSync(p));
}

/** The base64 SHA-256 of a PEM certificate's public key (what Chromium's SPKI list names). */
export function spkiHash(certPemFile: string): string {
  const der = new X509Certificate(readFileSync(certPemFile)).publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(der).digest("base64");
}

/** A headless Chromium that trusts the certificates whose SPKI hashes are given. */
export async function launchBrowser(chromium: string, trustedSpki: readonly string[]): Promise<Browser> {
  const { default: puppeteer } = await import("puppeteer-core");
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: [
      // Root in CI: Chromium's sandbox needs user namespaces it may not get.
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--no-first-run",
      ...(trustedSpki.length > 0 ? [`--ignore-certificate-errors-spki-list=${trustedSpki.join(",")}`] : []),
    ],
  });
}

/** A page whose console errors and uncaught exceptions are recorded in `errors`. */
export async function watchedPage(browser: Browser): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1360, height: 900 });
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(`${page.url()}: console error: ${msg.text()}`);
  });
  page.on("pageerror", (err) => errors.push(`${page.url()}: uncaught: ${String(err)}`));
  page.on("requestfailed", (req) =>
    errors.push(`${page.url()}: request failed: ${req.url()} ${req.failure()?.errorText ?? ""}`),
  );
  page.on("response", (res) => {
    if (res.status() >= 400) errors.push(`${page.url()}: HTTP ${res.status()} for ${res.url()}`);
  });
  return { page, errors };
}
