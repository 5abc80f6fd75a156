import { Metadata, status as GrpcStatus } from "@grpc/grpc-js";
import type { ServiceError } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import type { ErrorCode } from "../../common/errors.js";
import {
  detailsFromWire,
  detailsOf,
  ERROR_CODES,
  HarvestError,
  fromGrpcError,
  isHarvestError,
  toServiceError,
} from "../../common/errors.js";
import { parseDag } from "../../common/dag-spec.js";
import { ackError } from "../../datanode/block-sender.js";

/** A gRPC error as a client sees it when the server sent no Harvest code (transport failures, foreign servers). */
function plainGrpcError(code: GrpcStatus, details: string): Partial<ServiceError> {
  return {
    code,
    details,
    message: `${code} ${details}`,
    metadata: new Metadata(),
  };
}

describe("error codes on the wire", () => {
  it("round-trips a domain error's code, message and details", () => {
    const original = new HarvestError("DAG_INVALID_FIELD", "vertices[0].parallelism must be a number", {
      details: { field: "vertices[0].parallelism", line: "3" },
    });
    const back = fromGrpcError(toServiceError(original));
    expect(back).toBeInstanceOf(HarvestError);
    expect(back.code).toBe("DAG_INVALID_FIELD");
    expect(back.message).toBe("vertices[0].parallelism must be a number");
    expect(back.details).toEqual({
      field: "vertices[0].parallelism",
      line: "3",
    });
  });

  it("round-trips an error without details to empty details", () => {
    const back = fromGrpcError(toServiceError(new HarvestError("APP_NOT_FOUND", "no application application_1_0009")));
    expect(back.code).toBe("APP_NOT_FOUND");
    expect(back.message).toBe("no application application_1_0009");
    expect(back.details).toEqual({});
  });

  it("round-trips every error code", () => {
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      const back = fromGrpcError(
        toServiceError(new HarvestError(code, `msg ${code}`, { details: detailsFromWire({ k: code }) })),
      );
      expect(back.code, code).toBe(code);
      expect(back.message, code).toBe(`msg ${code}`);
      expect(back.details, code).toEqual({ k: code });
    }
  });

  it("sends domain errors with the gRPC status their code maps to", () => {
    expect(toServiceError(new HarvestError("APP_NOT_FOUND", "x")).code).toBe(GrpcStatus.NOT_FOUND);
    expect(toServiceError(new HarvestError("DAG_CYCLE", "x")).code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(toServiceError(new HarvestError("CONTAINER_TOKEN_INVALID", "x")).code).toBe(GrpcStatus.PERMISSION_DENIED);
    expect(toServiceError(new HarvestError("NODE_INSUFFICIENT_RESOURCES", "x")).code).toBe(
      GrpcStatus.RESOURCE_EXHAUSTED,
    );
    expect(toServiceError(new HarvestError("UNAVAILABLE", "x")).code).toBe(GrpcStatus.UNAVAILABLE);
  });

  it("maps every error code to a real gRPC status other than OK", () => {
    const statuses = new Set<number>(Object.values(GrpcStatus).filter((v): v is number => typeof v === "number"));
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      expect(statuses.has(status), code).toBe(true);
      expect(status, code).not.toBe(GrpcStatus.OK);
    }
  });

  it("sends a non-domain error as INTERNAL with its message", () => {
    const serr = toServiceError(new TypeError("cannot read properties of undefined"));
    expect(serr.code).toBe(GrpcStatus.INTERNAL);
    const back = fromGrpcError(serr);
    expect(back.code).toBe("INTERNAL");
    expect(back.message).toBe("cannot read properties of undefined");
  });

  it("sends a thrown non-Error value as INTERNAL", () => {
    const back = fromGrpcError(toServiceError("just a string"));
    expect(back.code).toBe("INTERNAL");
    expect(back.message).toBe("just a string");
  });

  it("turns an unknown gRPC error into INTERNAL, keeping the original as the cause", () => {
    const raw = plainGrpcError(GrpcStatus.UNKNOWN, "something odd");
    const err = fromGrpcError(raw);
    expect(err.code).toBe("INTERNAL");
    expect(err.message).toBe("something odd");
    expect(err.cause).toBe(raw);
  });

  it("turns a plain Error that is not a gRPC error into INTERNAL with its message", () => {
    const err = fromGrpcError(new Error("socket hang up"));
    expect(err.code).toBe("INTERNAL");
    expect(err.message).toBe("socket hang up");
  });

  it("turns an UNAVAILABLE status without a Harvest code into UNAVAILABLE", () => {
    const err = fromGrpcError(plainGrpcError(GrpcStatus.UNAVAILABLE, "No connection established"));
    expect(err.code).toBe("UNAVAILABLE");
    expect(err.message).toBe("No connection established");
  });

  it("turns a DEADLINE_EXCEEDED status without a Harvest code into DEADLINE_EXCEEDED", () => {
    expect(fromGrpcError(plainGrpcError(GrpcStatus.DEADLINE_EXCEEDED, "Deadline exceeded")).code).toBe(
      "DEADLINE_EXCEEDED",
    );
  });

  it("prefers the Harvest code in the metadata over the gRPC status", () => {
    const serr = toServiceError(new HarvestError("CONTAINER_NOT_FOUND", "gone"));
    // A proxy may rewrite the status; the code in the trailers is the contract.
    const back = fromGrpcError({ ...serr, code: GrpcStatus.UNAVAILABLE });
    expect(back.code).toBe("CONTAINER_NOT_FOUND");
  });

  it("ignores a Harvest code it does not know and falls back to the gRPC status", () => {
    const metadata = new Metadata();
    metadata.set("harvest-code", "NOT_A_REAL_CODE");
    const back = fromGrpcError({
      code: GrpcStatus.UNAVAILABLE,
      details: "down",
      metadata,
    });
    expect(back.code).toBe("UNAVAILABLE");
  });

  it("keeps the code when the details metadata is not valid JSON", () => {
    const metadata = new Metadata();
    metadata.set("harvest-code", "APP_NOT_FOUND");
    metadata.set("harvest-details-bin", Buffer.from("{not json"));
    const back = fromGrpcError({
      code: GrpcStatus.NOT_FOUND,
      details: "missing",
      metadata,
    });
    expect(back.code).toBe("APP_NOT_FOUND");
    expect(back.details).toEqual({});
  });

  it("sends a DAG error whose details name a non-ASCII field to the client with its code", () => {
    let caught: unknown;
    try {
      parseDag(
        JSON.stringify({
          name: "j",
          vertices: [{ name: "v", parallelism: 1, command: ["x"], resources: { vcores: 1, memoryMb: 1 }, énv: {} }],
        }),
      );
    } catch (err) {
      caught = err;
    }
    const back = fromGrpcError(toServiceError(caught));
    expect(back.code).toBe("DAG_INVALID_FIELD");
    expect(detailsOf(back, "DAG_INVALID_FIELD")?.field).toBe("vertices[0].énv");
  });

  it("turns a missing error value into INTERNAL instead of throwing", () => {
    expect(fromGrpcError(undefined).code).toBe("INTERNAL");
    expect(fromGrpcError(null).code).toBe("INTERNAL");
  });

  it("returns a HarvestError given to it unchanged", () => {
    const err = new HarvestError("CONFIG_INVALID", "bad port");
    expect(fromGrpcError(err)).toBe(err);
  });

  it("recognizes domain errors by code", () => {
    const err = new HarvestError("APP_NOT_FOUND", "x");
    expect(isHarvestError(err)).toBe(true);
    expect(isHarvestError(err, "APP_NOT_FOUND", "DAG_CYCLE")).toBe(true);
    expect(isHarvestError(err, "DAG_CYCLE")).toBe(false);
    expect(isHarvestError(new Error("x"))).toBe(false);
  });
});

describe("typed details", () => {
  it("reads a code's details only through that code", () => {
    const err: unknown = new HarvestError("DATANODE_PIPELINE_FAILED", "pipeline failed at dn-2", {
      details: { datanodeId: "dn-2", code: "DATANODE_NO_SPACE" },
    });
    expect(detailsOf(err, "DATANODE_PIPELINE_FAILED")?.datanodeId).toBe("dn-2");
    expect(detailsOf(err, "DFS_WRITE_FAILED")).toBeUndefined();
    expect(detailsOf(new Error("plain"), "DATANODE_PIPELINE_FAILED")).toBeUndefined();
    expect(isHarvestError(err, "DATANODE_PIPELINE_FAILED") && err.details.code).toBe("DATANODE_NO_SPACE");
  });

  it("keeps typed details the same on the wire: a JSON object of strings in the trailers", () => {
    const original = new HarvestError(
      "STATE_INVALID_TRANSITION",
      "a container in state COMPLETE does not accept launch",
      {
        details: { machine: "container", state: "COMPLETE", event: "launch", id: "c1" },
      },
    );
    const serr = toServiceError(original);
    const raw = serr.metadata?.get("harvest-details-bin")[0];
    expect(JSON.parse((raw as Buffer).toString("utf8"))).toEqual({
      machine: "container",
      state: "COMPLETE",
      event: "launch",
      id: "c1",
    });
    const back = fromGrpcError(serr);
    expect(detailsOf(back, "STATE_INVALID_TRANSITION")).toEqual(original.details);
  });

  it("names the failed datanode of a not-ok pipeline ack under the key the client reads (datanodeId)", () => {
    // The datanode used to write `failedDatanodeId` and the client to read `datanodeId`.
    const err = ackError({
      seq: 3,
      ok: false,
      errorCode: "DATANODE_NO_SPACE",
      errorMessage: "the disk is full",
      failedDatanodeId: "dn-3",
    } as Parameters<typeof ackError>[0]);
    expect(detailsOf(err, "DATANODE_PIPELINE_FAILED")).toEqual({ datanodeId: "dn-3", code: "DATANODE_NO_SPACE" });
    expect(err.message).toBe("the disk is full");
    expect(isHarvestError(err.cause, "DATANODE_NO_SPACE")).toBe(true);
  });
});
