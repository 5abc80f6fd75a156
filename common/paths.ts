/** Locating the package on disk, whether running from sources (vitest, tsx) or from dist/. */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let root: string | undefined;

/** The directory holding Harvest's package.json. */
export function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json")) || !existsSync(join(dir, "proto"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("cannot find the harvest package root");
    dir = parent;
  }
  root = dir;
  return root;
}

/** Where `npm run build` (scripts/build-native.mjs) puts native/binding.gyp's target `target`. */
export function nativeAddonPath(target: string): string {
  return join(packageRoot(), "native", "build", "Release", `${target}.node`);
}

/** One of Harvest's native routines (`nativeAddonPath`); undefined when it was not built or does not load here. */
export function loadNativeAddon<T>(target: string): T | undefined {
  try {
    return createRequire(import.meta.url)(nativeAddonPath(target)) as T;
  } catch {
    return undefined;
  }
}

/** The compiled entry point of a program shipped in dist/ (e.g. "jobmanager/main.js"). */
export function distEntry(relative: string): string {
  return join(packageRoot(), "dist", relative);
}

/** `../shared/data` beside the checkout, when present (it is absent on a user's fresh clone). */
export function sharedDataDir(): string | undefined {
  const fromEnv = process.env["HARVEST_SHARED_DATA"];
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  const dir = join(packageRoot(), "..", "shared", "data");
  return existsSync(dir) ? dir : undefined;
}
