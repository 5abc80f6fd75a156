/**
 * The delegation tokens cancelled before they expired (HDFS's cancelToken): the namenode refuses them from the moment
 * of the cancellation, and keeps them durably (in its store, so a restart still refuses them) until they would have
 * expired anyway, then forgets them. A token is known by its nonce (common/delegation-token.ts).
 */
import type { DelegationClaims } from "../common/delegation-token.js";

/** A cancelled token as stored: its nonce and when it would have expired. */
export interface CancelledToken {
  nonce: string;
  expiresMs: number;
}

/** Where cancellations are kept (NamespaceStore); each write resolves once durable. */
export interface CancelledTokenStore {
  loadCancelledTokens(): Promise<CancelledToken[]>;
  putCancelledToken(token: CancelledToken): Promise<void>;
  deleteCancelledTokens(nonces: readonly string[]): Promise<void>;
}

/** The cancelled, not yet expired, delegation tokens of one namenode. */
export class CancelledTokens {
  /** Nonce -> when the token expires. Invariant: holds every durable cancellation not yet pruned. */
  private readonly expiresByNonce = new Map<string, number>();

  constructor(private readonly store: CancelledTokenStore) {}

  /** How many are kept. */
  get size(): number {
    return this.expiresByNonce.size;
  }

  /** Reads the cancellations back after a (re)start, forgetting those whose tokens have expired since. */
  async load(nowMs: number): Promise<void> {
    for (const t of await this.store.loadCancelledTokens()) this.expiresByNonce.set(t.nonce, t.expiresMs);
    await this.prune(nowMs);
  }

  /** True when the token these claims belong to was cancelled. */
  has(claims: DelegationClaims): boolean {
    return this.expiresByNonce.has(claims.nonce);
  }

  /**
   * Cancels a token; resolves once the cancellation is durable. It is refused from the call on: should the write fail
   * (the error is thrown), it stays refused until a restart, which is the safe side; the caller may cancel again.
   */
  async cancel(claims: DelegationClaims): Promise<void> {
    this.expiresByNonce.set(claims.nonce, claims.expiresMs);
    await this.store.putCancelledToken({ nonce: claims.nonce, expiresMs: claims.expiresMs });
  }

  /** Forgets the cancellations of tokens expired by `nowMs` (an expired token is refused anyway); answers how many. */
  async prune(nowMs: number): Promise<number> {
    const expired: string[] = [];
    for (const [nonce, expiresMs] of this.expiresByNonce) if (expiresMs <= nowMs) expired.push(nonce);
    if (expired.length === 0) return 0;
    await this.store.deleteCancelledTokens(expired);
    for (const nonce of expired) this.expiresByNonce.delete(nonce);
    return expired.length;
  }
}
