/**
 * Block access tokens (HDFS's BlockTokenSecretManager): the namenode signs (block, access mode, user, expiry) with a
 * secret key it shares with the datanodes over their authenticated stream, and rolls that key periodically; a datanode
 * serves or accepts a block only with a valid, unexpired token for that block and mode. A token is opaque to clients:
 * `v1.<key id>.<payload, base64url JSON>.<HMAC-SHA256, base64url>`. Pure: the clock and the random source are passed in.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { HarvestError } from "./errors.js";
import { mergeOptions } from "./options.js";

/** What a token lets its holder do with a block. */
export type BlockAccess = "READ" | "WRITE";

/** A secret key shared by the namenode and the datanodes. */
export interface BlockKey {
  keyId: number;
  /** 32 random bytes. */
  secret: Buffer;
  /** After this no token signed with it is accepted (the longest token lifetime past the key's retirement). */
  expiresMs: number;
}

/** What a token says. */
export interface BlockTokenClaims {
  blockId: number;
  access: BlockAccess;
  /** Who it was issued to (for logs and audits). */
  user: string;
  expiresMs: number;
  keyId: number;
  /**
   * HA: the term (epoch) of the namenode that issued it; absent without HA. A datanode refuses a WRITE token of an
   * older term than one it has heard of (STALE_EPOCH), so an old active cannot get a write acknowledged.
   */
  epoch?: number;
}

/** Settings of the namenode's key manager. */
export interface BlockKeyOptions {
  /** A token is valid this long after it is issued. @default 3600000 (1 h) */
  tokenLifetimeMs: number;
  /** A new key signs new tokens this often; old keys verify until their tokens expire. @default 1800000 */
  keyUpdateIntervalMs: number;
  /** HA: the issuing namenode's term, named in every token (`setEpoch` changes it); 0 = not HA, none named. @default 0 */
  epoch: number;
}

/** Fills the defaults and checks the options. */
export function resolveBlockKeyOptions(o: Partial<BlockKeyOptions> = {}): BlockKeyOptions {
  const r = mergeOptions<BlockKeyOptions>(
    "blockTokens",
    { tokenLifetimeMs: 3_600_000, keyUpdateIntervalMs: 1_800_000, epoch: 0 },
    o,
  );
  if (!(r.tokenLifetimeMs > 0)) throw new HarvestError("CONFIG_INVALID", "blockTokens.tokenLifetimeMs must be > 0");
  if (!(r.keyUpdateIntervalMs > 0))
    throw new HarvestError("CONFIG_INVALID", "blockTokens.keyUpdateIntervalMs must be > 0");
  checkEpoch(r.epoch);
  return r;
}

function checkEpoch(epoch: number): void {
  if (!(Number.isSafeInteger(epoch) && epoch >= 0))
    throw new HarvestError("CONFIG_INVALID", "blockTokens.epoch must be a non-negative integer (0 = not HA)");
}

/** Key ids are int32 on the wire. */
const MAX_KEY_ID = 0x7fff_ffff;

/** The keys a datanode verifies tokens with: one namenode's by id, or (HA) one such set per namenode. */
export type BlockKeySets = ReadonlyMap<number, BlockKey> | readonly ReadonlyMap<number, BlockKey>[];

function b64(buf: Buffer): string {
  return buf.toString("base64url");
}

function sign(secret: Buffer, text: string): Buffer {
  return createHmac("sha256", secret).update(text).digest();
}

/**
 * The namenode's side: the current key signs, rolled every `keyUpdateIntervalMs`; `keys()` is what datanodes need to
 * verify every token still alive. Key ids count up from `firstKeyId` (1..2^31-1, wrapping to 1): HA namenodes each
 * start at a random one, so that their ids seldom collide (a datanode tries every namenode's key of an id anyway).
 */
export class BlockKeyManager {
  private readonly options: BlockKeyOptions;
  private current: BlockKey;
  private readonly all = new Map<number, BlockKey>();
  private rolledAtMs: number;
  private epochValue: number;

  constructor(
    private readonly nowMs: () => number,
    options: Partial<BlockKeyOptions> = {},
    private readonly random: (n: number) => Buffer = randomBytes,
    firstKeyId = 1,
  ) {
    this.options = resolveBlockKeyOptions(options);
    this.epochValue = this.options.epoch;
    if (!(Number.isSafeInteger(firstKeyId) && firstKeyId >= 1 && firstKeyId <= MAX_KEY_ID))
      throw new HarvestError("CONFIG_INVALID", `a first block key id must be an integer in 1..${MAX_KEY_ID}`);
    this.rolledAtMs = nowMs();
    this.current = this.newKey(firstKeyId);
  }

  private newKey(keyId: number): BlockKey {
    // A key signs for one interval, and its last token lives a lifetime past that.
    const key = {
      keyId,
      secret: this.random(32),
      expiresMs: this.nowMs() + this.options.keyUpdateIntervalMs + this.options.tokenLifetimeMs,
    };
    this.all.set(keyId, key);
    return key;
  }

  /** Rolls the key when its interval has passed and forgets expired keys; true when the set of keys changed. */
  maybeRoll(): boolean {
    const now = this.nowMs();
    let changed = false;
    if (now - this.rolledAtMs >= this.options.keyUpdateIntervalMs) {
      // Key ids travel as int32: wrap around long before that.
      this.current = this.newKey(this.current.keyId >= MAX_KEY_ID ? 1 : this.current.keyId + 1);
      this.rolledAtMs = now;
      changed = true;
    }
    for (const [id, k] of this.all)
      if (k.expiresMs <= now && id !== this.current.keyId) {
        this.all.delete(id);
        changed = true;
      }
    return changed;
  }

  /** The term named in the tokens issued from now on (0: none, not HA). */
  get epoch(): number {
    return this.epochValue;
  }

  /** HA: the namenode became active in term `epoch`; tokens issued from now on name it. */
  setEpoch(epoch: number): void {
    checkEpoch(epoch);
    this.epochValue = epoch;
  }

  /** Every key a datanode needs to verify the tokens still alive. */
  keys(): BlockKey[] {
    return [...this.all.values()];
  }

  /** A token for `blockId` and `access`, issued to `user`, valid for the token lifetime. */
  issue(blockId: number, access: BlockAccess, user: string): string {
    const claims: BlockTokenClaims = {
      blockId,
      access,
      user,
      expiresMs: this.nowMs() + this.options.tokenLifetimeMs,
      keyId: this.current.keyId,
      ...(this.epochValue > 0 ? { epoch: this.epochValue } : {}),
    };
    const payload = b64(Buffer.from(JSON.stringify(claims), "utf8"));
    const head = `v1.${claims.keyId}.${payload}`;
    return `${head}.${b64(sign(this.current.secret, head))}`;
  }
}

/**
 * The datanode's side: checks a token against the keys it holds, for a block and a mode. Throws DATANODE_BAD_TOKEN
 * with a message that says what is wrong but reveals nothing a stranger could use.
 */
export function verifyBlockToken(
  token: string,
  keys: BlockKeySets,
  blockId: number,
  access: BlockAccess,
  nowMs: number,
): BlockTokenClaims {
  const claims = verifyBlockTokenSignature(token, keys, nowMs);
  const bad = (why: string): never => {
    throw new HarvestError("DATANODE_BAD_TOKEN", `block access refused: ${why}`);
  };
  if (claims.blockId !== blockId) bad("block token is for another block");
  // A WRITE token does not read, and a READ token does not write.
  if (claims.access !== access) bad(`block token does not allow ${access}`);
  return claims;
}

/**
 * Checks that a token was signed by one of `keys` and has not expired, whatever block and mode it is for: how a
 * datanode authenticates a caller without a certificate (a task) before any handler runs. With several key sets
 * (HA: one per namenode, whose key ids may coincide), every unexpired key of the token's id is tried. Throws
 * DATANODE_BAD_TOKEN.
 */
export function verifyBlockTokenSignature(token: string, keys: BlockKeySets, nowMs: number): BlockTokenClaims {
  const bad = (why: string): never => {
    throw new HarvestError("DATANODE_BAD_TOKEN", `block access refused: ${why}`);
  };
  if (typeof token !== "string" || token.length === 0 || token.length > 4096) bad("no block token");
  const parts = token.split(".");
  if (parts.length !== 4 || parts[0] !== "v1") bad("malformed block token");
  const keyId = Number(parts[1]);
  const sets = (Array.isArray(keys) ? keys : [keys]) as readonly ReadonlyMap<number, BlockKey>[];
  const candidates = sets
    .map((set) => set.get(keyId))
    .filter((k): k is BlockKey => k !== undefined && k.expiresMs > nowMs);
  if (candidates.length === 0) bad("block token signed by an unknown or expired key");
  const head = `${parts[0]}.${parts[1]}.${parts[2]}`;
  const given = Buffer.from(parts[3]!, "base64url");
  const key = candidates.find((k) => {
    const expected = sign(k.secret, head);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!key) bad("block token signature invalid");
  let claims: BlockTokenClaims;
  try {
    claims = JSON.parse(Buffer.from(parts[2]!, "base64url").toString("utf8")) as BlockTokenClaims;
  } catch {
    return bad("malformed block token");
  }
  if (claims.keyId !== key!.keyId) bad("malformed block token");
  if (!(claims.expiresMs > nowMs)) bad("block token expired");
  if (claims.epoch !== undefined && !(Number.isSafeInteger(claims.epoch) && claims.epoch > 0))
    bad("malformed block token");
  return claims;
}
