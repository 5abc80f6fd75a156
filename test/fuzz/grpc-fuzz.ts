/**
 * Fuzzing gRPC services generically: every method of a service read from the .proto files, arbitrary requests built
 * from its message descriptors (random, empty and huge values; wrong wire types; raw garbage), raw calls that carry
 * bytes as they are, and the property every answer must meet.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import fc from "fast-check";
import { join } from "node:path";
import { ERROR_CODES } from "../../common/errors.js";
import { CHANNEL_OPTIONS, HARVEST_PROTO_FILES } from "../../common/grpc.js";
import { packageRoot } from "../../common/paths.js";

/** One method of a Harvest service, with the serializer of its request type. */
export interface MethodInfo {
  service: string;
  name: string;
  path: string;
  requestStream: boolean;
  responseStream: boolean;
  requestType: string;
  serialize(value: unknown): Buffer;
}

interface FieldDesc {
  name: string;
  label: string;
  type: string;
  typeName: string;
}
interface MessageDesc {
  name: string;
  field: FieldDesc[];
  nestedType: MessageDesc[];
  enumType: { name: string; value: { name: string }[] }[];
  options: { mapEntry?: boolean } | null;
}

let definition: protoLoader.PackageDefinition | undefined;

/** The package definition, loaded with the options common/grpc.ts uses. */
function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= protoLoader.loadSync([...HARVEST_PROTO_FILES], {
    keepCase: false,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: [join(packageRoot(), "proto")],
  });
  return definition;
}

/** Every method of `service` ("ClientNamenode", ...). */
export function serviceMethods(service: string): MethodInfo[] {
  const svc = packageDefinition()[`harvest.v1.${service}`] as grpc.ServiceDefinition | undefined;
  if (!svc) throw new Error(`no service ${service}`);
  return Object.entries(svc).map(([name, m]) => ({
    service,
    name,
    path: m.path,
    requestStream: m.requestStream,
    responseStream: m.responseStream,
    requestType: ((m as unknown as { requestType: { type: MessageDesc } }).requestType.type as MessageDesc).name,
    serialize: (v: unknown) => m.requestSerialize(v),
  }));
}

function messageDesc(name: string, scope?: MessageDesc): MessageDesc {
  const nested = scope?.nestedType.find((n) => n.name === name);
  if (nested) return nested;
  const top = packageDefinition()[`harvest.v1.${name}`] as { type?: MessageDesc } | undefined;
  if (!top?.type) throw new Error(`no message ${name}`);
  return top.type;
}

function enumValues(name: string, scope?: MessageDesc): string[] {
  const nested = scope?.enumType.find((e) => e.name === name);
  if (nested) return nested.value.map((v) => v.name);
  const top = packageDefinition()[`harvest.v1.${name}`] as { type?: { value: { name: string }[] } } | undefined;
  return top?.type?.value.map((v) => v.name) ?? ["0"];
}

const INT_EDGES = [0, 1, -1, 2 ** 31 - 1, -(2 ** 31), 2 ** 32, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER];

function scalarArb(type: string, strings: fc.Arbitrary<string>): fc.Arbitrary<unknown> {
  switch (type) {
    case "TYPE_STRING":
      return strings;
    case "TYPE_BOOL":
      return fc.boolean();
    case "TYPE_DOUBLE":
    case "TYPE_FLOAT":
      return fc.oneof(
        fc.double(),
        fc.constantFrom(0, -1, 1e308, Number.NaN, Infinity),
        fc.integer({ min: 0, max: 200 }),
      );
    case "TYPE_BYTES":
      return fc.oneof(
        { weight: 8, arbitrary: fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)) },
        { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
        { weight: 1, arbitrary: fc.nat({ max: 4 * 1024 * 1024 }).map((n) => Buffer.alloc(n, 0x61)) },
      );
    default:
      return fc.oneof(fc.integer({ min: -3, max: 1000 }), fc.constantFrom(...INT_EDGES), fc.maxSafeInteger());
  }
}

/**
 * Requests of message type `typeName`: every field optional, strings from `strings`, numbers at their edges, repeated
 * fields empty, short or (rarely) long, nested messages a few levels deep.
 */
export function messageArb(
  typeName: string,
  strings: fc.Arbitrary<string>,
  depth = 0,
  scope?: MessageDesc,
): fc.Arbitrary<Record<string, unknown>> {
  const desc = messageDesc(typeName, scope);
  if (depth > 3) return fc.constant({});
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of desc.field) {
    let one: fc.Arbitrary<unknown>;
    let isMap = false;
    if (f.type === "TYPE_MESSAGE") {
      const sub = messageDesc(f.typeName, desc);
      if (sub.options?.mapEntry) {
        isMap = true;
        one = fc.dictionary(strings, strings, { maxKeys: 4 });
      } else
        one = fc.oneof(
          { weight: 1, arbitrary: fc.constant({}) },
          { weight: 4, arbitrary: messageArb(f.typeName, strings, depth + 1, desc) },
        );
    } else if (f.type === "TYPE_ENUM") {
      one = fc.constantFrom(...enumValues(f.typeName, desc));
    } else one = scalarArb(f.type, strings);
    fields[f.name] =
      f.label === "LABEL_REPEATED" && !isMap
        ? fc.oneof(
            { weight: 6, arbitrary: fc.array(one, { maxLength: 4 }) },
            { weight: 1, arbitrary: fc.array(one, { minLength: 200, maxLength: 2000 }) },
          )
        : one;
  }
  return fc.record(fields, { requiredKeys: [] });
}

/** Encodes `value` with the method's serializer, or undefined when the client library refuses the value. */
function tryEncode(method: MethodInfo, value: unknown): Buffer | undefined {
  try {
    return method.serialize(value);
  } catch {
    return undefined;
  }
}

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n >>> 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
}

/**
 * Protobuf bytes with the right field numbers but any wire type (a string where a number is expected, a truncated
 * length, an unknown group), or with field numbers the type does not have.
 */
export function wrongTypeBytesArb(): fc.Arbitrary<Buffer> {
  const field = fc
    .tuple(
      fc.integer({ min: 1, max: 20 }),
      fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 7),
      fc.uint8Array({ maxLength: 24 }),
      fc.integer({ min: -2, max: 30 }),
    )
    .map(([num, wire, payload, declaredLen]) => {
      const key = varint((num << 3) | wire);
      if (wire === 0) return [...key, ...varint(payload[0] ?? 0)];
      if (wire === 1) return [...key, ...payload.slice(0, 8)];
      if (wire === 5) return [...key, ...payload.slice(0, 4)];
      if (wire === 2) return [...key, ...varint(declaredLen < 0 ? 0xffffffff : declaredLen), ...payload];
      return [...key, ...payload];
    });
  return fc.array(field, { maxLength: 8 }).map((fs) => Buffer.from(fs.flat()));
}

/** Bytes for one request of `method`: mostly well-encoded random requests, some wrong-typed, some pure garbage. */
export function requestBytesArb(method: MethodInfo, strings: fc.Arbitrary<string>): fc.Arbitrary<Buffer> {
  const structured = messageArb(method.requestType, strings)
    .map((v) => tryEncode(method, v))
    .filter((b): b is Buffer => b !== undefined);
  return fc.oneof(
    { weight: 6, arbitrary: structured },
    { weight: 2, arbitrary: wrongTypeBytesArb() },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 128 }).map((a) => Buffer.from(a)) },
  );
}

/** Strings for request fields: random text, the `known` ids and paths of the cluster, edge cases, and rarely huge. */
export function requestStrings(known: readonly string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.string({ maxLength: 16 }) },
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        ...known,
        "",
        " ",
        ".",
        "..",
        "/",
        "//",
        "../../etc/passwd",
        "/a/../b",
        "a\u0000b",
        "\u00e9\u{1F600}",
        "-1",
        "1e400",
      ),
    },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 32 }) },
    { weight: 1, arbitrary: fc.nat({ max: 300_000 }).map((n) => "x".repeat(n)) },
  );
}

/** How a call ended. */
export interface Outcome {
  status: grpc.status;
  /** The Harvest error code in the trailers, if any. */
  code: string | undefined;
  details: string;
  /** A bidirectional stream still open when the test stopped waiting (a long-lived channel, cancelled). */
  open?: boolean;
}

const identity = (b: Buffer): Buffer => b;

function outcomeOf(err: grpc.ServiceError | null | undefined): Outcome {
  if (!err) return { status: grpc.status.OK, code: undefined, details: "" };
  const code = err.metadata?.get("harvest-code")[0];
  return { status: err.code, code: typeof code === "string" ? code : undefined, details: err.details ?? "" };
}

/** A client for raw calls to `address`: generic methods, bytes in and out, Harvest's channel options. */
export function rawClient(address: string, creds: grpc.ChannelCredentials): grpc.Client {
  return new grpc.Client(address, creds, CHANNEL_OPTIONS);
}

/** Sends `messages` (one for a unary or server-streaming method) and resolves how the call ended. */
export function rawCall(
  client: grpc.Client,
  method: MethodInfo,
  messages: Buffer[],
  opts: { timeoutMs?: number; metadata?: grpc.Metadata; settleMs?: number } = {},
): Promise<Outcome> {
  const metadata = opts.metadata ?? new grpc.Metadata();
  const options = { deadline: Date.now() + (opts.timeoutMs ?? 10_000) };
  return new Promise((resolve) => {
    if (!method.requestStream && !method.responseStream) {
      client.makeUnaryRequest(method.path, identity, identity, messages[0] ?? Buffer.alloc(0), metadata, options, (e) =>
        resolve(outcomeOf(e)),
      );
      return;
    }
    if (!method.requestStream) {
      const s = client.makeServerStreamRequest(
        method.path,
        identity,
        identity,
        messages[0] ?? Buffer.alloc(0),
        metadata,
        options,
      );
      s.on("data", () => undefined);
      s.on("error", (e: grpc.ServiceError) => resolve(outcomeOf(e)));
      s.on("end", () => resolve(outcomeOf(null)));
      return;
    }
    if (!method.responseStream) {
      const s = client.makeClientStreamRequest(method.path, identity, identity, metadata, options, (e) =>
        resolve(outcomeOf(e)),
      );
      for (const m of messages) s.write(m);
      s.end();
      return;
    }
    const s = client.makeBidiStreamRequest(method.path, identity, identity, metadata, options);
    let done = false;
    const finish = (o: Outcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(o);
    };
    s.on("data", () => undefined);
    s.on("error", (e: grpc.ServiceError) => finish(outcomeOf(e)));
    s.on("end", () => finish(outcomeOf(null)));
    for (const m of messages) s.write(m);
    s.end();
    // A channel stream (a node's or a datanode's) may stay open after a valid registration: that is not a hang.
    const timer = setTimeout(() => {
      finish({ status: grpc.status.OK, code: undefined, details: "", open: true });
      s.cancel();
    }, opts.settleMs ?? 300);
  });
}

/**
 * The property of every answer: OK, or a Harvest error code (never INTERNAL) in the trailers; bytes that do not decode
 * as the request type too (INVALID_ARGUMENT, common/grpc.ts). Only a message over gRPC's size limit is refused by gRPC
 * itself, before any Harvest code runs (no code then).
 */
export function checkOutcome(o: Outcome, what: string): void {
  if (o.status === grpc.status.OK) return;
  if (o.status === grpc.status.DEADLINE_EXCEEDED) throw new Error(`${what}: no answer before the deadline (a hang)`);
  if (o.code === undefined) {
    if (o.status === grpc.status.RESOURCE_EXHAUSTED && /larger than max/i.test(o.details)) return;
    throw new Error(`${what}: status ${grpc.status[o.status]} without a Harvest code: ${o.details}`);
  }
  if (!(o.code in ERROR_CODES)) throw new Error(`${what}: unknown code ${o.code}: ${o.details}`);
  if (o.code === "INTERNAL") throw new Error(`${what}: INTERNAL on bad input: ${o.details}`);
}

/** How the answers of a fuzz campaign fell out: every call, and of them the OK, the coded and the left-open ones. */
export class OutcomeTally {
  calls = 0;
  ok = 0;
  coded = 0;
  open = 0;

  /** Counts `o` and checks it (`checkOutcome`): throws, naming `what`, when the answer breaks the property. */
  check(o: Outcome, what: string): void {
    this.calls++;
    if (o.open) this.open++;
    else if (o.code) this.coded++;
    else this.ok++;
    checkOutcome(o, what);
  }
}
