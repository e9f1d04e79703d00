// A short-lived memory of who an access token belongs to, so that a burst of requests with one token reads its
// session, user and membership once instead of once per request. Meant to be shared by every path that resolves
// an operator (REST today); it learns of revocations on every instance at once (revocations.ts).
import { credentialKind, type ActorResolver, type OperatorActor } from './actor.js';
import { Revocations, type RevocationDeps } from './revocations.js';

/**
 * How long an answer is reused. Revocation does not wait for it; it bounds what no event announces (a renamed
 * user), and what a lost notification could leave behind.
 */
const TTL_MS = 2_000;
const MAX_ENTRIES = 10_000;

interface Entry {
  actor: OperatorActor;
  /** When the entry stops being used: its time to live, the token's expiry or the session's end, whichever first. */
  until: number;
}

/**
 * Access-token callers for a moment. Only callers that were let in are kept (a live session, and an accepted
 * membership when the token names an organization): a refusal is read again each time, so access that is granted
 * is seen at once, and access that ends is announced (logout, reuse detection, password change, suspension,
 * removal, role change, organization deleted) and dropped on every instance before the next request.
 */
export class CallerCache {
  private readonly entries = new Map<string, Entry>();
  private readonly revocations: Revocations;

  constructor(
    private readonly actors: ActorResolver,
    deps: RevocationDeps,
  ) {
    this.revocations = new Revocations(deps);
    this.revocations.onRevoke((r) => {
      if ('everyone' in r) return this.entries.clear();
      for (const [token, { actor }] of this.entries) {
        if ('userId' in r ? actor.userId === r.userId : actor.orgId === r.organizationId) this.entries.delete(token);
      }
    });
  }

  /** Whether callers are being remembered now (this instance hears every revocation). */
  get live(): boolean {
    return this.revocations.live;
  }

  start(): void {
    this.revocations.start();
  }

  stop(): Promise<void> {
    this.entries.clear();
    return this.revocations.stop();
  }

  /** Same answers as ActorResolver.operator, access tokens remembered for a moment. */
  async operator(token: string): Promise<OperatorActor> {
    if (!this.revocations.live) return this.actors.operator(token);
    const now = Date.now();
    const hit = this.entries.get(token);
    if (hit && now < hit.until) return hit.actor;
    if (credentialKind(token) !== 'access') return this.actors.operator(token);
    const generation = this.revocations.generation;
    const actor = await this.actors.operator(token);
    const admitted = actor.orgId === null || actor.membership?.status === 'accepted';
    if (admitted && generation === this.revocations.generation && this.revocations.live) {
      if (this.entries.size >= MAX_ENTRIES) this.sweep(now);
      const until = Math.min(now + TTL_MS, actor.tokenExpiresAt * 1000, actor.sessionExpiresAt ?? Infinity);
      this.entries.set(token, { actor, until });
    }
    return actor;
  }

  private sweep(now: number): void {
    for (const [token, entry] of this.entries) if (now >= entry.until) this.entries.delete(token);
    // Still full of live entries: start over rather than grow without bound.
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
  }
}
