// Generates TypeScript types for every .proto in proto/ into proto/generated/ (never edit those files by hand).
import { execFileSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const protoDir = join(root, "proto");
const outDir = join(protoDir, "generated");
const files = readdirSync(protoDir).filter((f) => f.endsWith(".proto"));
rmSync(outDir, { recursive: true, force: true });
const bin = join(root, "node_modules", "@grpc", "proto-loader", "build", "bin", "proto-loader-gen-types.js");
// These options must match the loader options in common/grpc.ts.
execFileSync(
  process.execPath,
  [
    bin,
    "--longs=Number",
    "--enums=String",
    "--defaults",
    "--oneofs",
    "--grpcLib=@grpc/grpc-js",
    "--outDir",
    outDir,
    "-I",
    protoDir,
    "--importFileExtension=.js",
    "--inputTemplate=%s",
    "--outputTemplate=%sOutput",
    ...files,
  ],
  { stdio: "inherit" },
);
// common.proto has no service: its aggregate file is unused and trips noUnusedLocals.
rmSync(join(outDir, "common.ts"), { force: true });
