// A short-lived memory of who an access token belongs to, shared by REST and the agents' socket handshake: a burst
// of requests, or an agent reconnecting (a network blip, a proxy restart, a second tab), presents the same token
// again, and the session, user and membership read moments ago still hold unless a revocation said otherwise. Every
// instance hears revocations through PostgreSQL (revocations.ts), so a Redis outage changes nothing here.
import { credentialKind, type ActorResolver, type CredentialKind, type OperatorActor, type VisitorActor } from './actor.js';
import { Revocations, type AvailabilityChange, type CallerNotice, type RevocationDeps } from './revocations.js';

/**
 * How long an answer is reused, by REST and handshakes alike. Revocation does not wait for it: every revocation
 * drops its entries on every instance as soon as each reads the notice (milliseconds after the commit), and
 * nothing is kept while an instance could miss one. So it only bounds what no notice announces (a renamed user, a changed email), and 10 s of that is
 * the price of answering an agent's reconnect (socket.io-client retries after 1-5 s) from memory.
 */
const TTL_MS = 10_000;
const MAX_ENTRIES = 50_000;

interface Entry {
  actor: OperatorActor;
  /** When the entry stops being used: its time to live, the token's expiry or the session's end, whichever first. */
  until: number;
}

/** The same caller with the availability chosen since, as a new actor: sockets let in with the old one keep theirs. */
function following(actor: OperatorActor, change: AvailabilityChange): OperatorActor {
  if (actor.orgId !== change.organizationId || actor.userId !== change.userId || !actor.membership) return actor;
  return { ...actor, membership: { ...actor.membership, availability: change.availability } };
}

/** Whether a remembered caller is one a revocation names (`everyone` is handled by emptying the memory). */
function revokes(notice: Exclude<CallerNotice, AvailabilityChange | { everyone: true }>, actor: OperatorActor): boolean {
  if ('sessionIds' in notice) return notice.sessionIds.includes(actor.sessionId);
  if ('organizationId' in notice) return actor.orgId === notice.organizationId && (notice.userId === undefined || actor.userId === notice.userId);
  return actor.userId === notice.userId;
}

/**
 * Access-token callers for a moment. Only callers that were let in are kept (a live session, and an accepted
 * membership when the token names an organization): a refusal is read again each time, so access that is granted
 * is seen at once, and access that ends is announced (logout, reuse detection, password change, suspension,
 * removal, role change, organization deleted) and dropped on every instance as soon as it reads the notice.
 */
export class CallerCache {
  private readonly entries = new Map<string, Entry>();
  private readonly revocations: Revocations;
  /** Availabilities chosen while each lookup was reading the database (it may have read the one before). */
  private readonly loading = new Set<AvailabilityChange[]>();

  constructor(
    private readonly actors: ActorResolver,
    deps: RevocationDeps,
    /** The bound on remembered callers (a test sets a small one to see what a full memory forgets). */
    private readonly maxEntries = MAX_ENTRIES,
  ) {
    this.revocations = new Revocations(deps);
    this.revocations.onNotice((notice) => {
      if ('everyone' in notice) return this.entries.clear();
      if ('availability' in notice) {
        for (const changes of this.loading) changes.push(notice);
        for (const entry of this.entries.values()) entry.actor = following(entry.actor, notice);
        return;
      }
      for (const [token, { actor }] of this.entries) if (revokes(notice, actor)) this.entries.delete(token);
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

  /** The socket handshake's caller, as ActorResolver.fromToken answers it; a person's access token from memory. */
  fromToken(token: string, kind: CredentialKind): Promise<OperatorActor | VisitorActor> {
    return kind === 'access' ? this.operator(token) : this.actors.fromToken(token, kind);
  }

  /** Same answers as ActorResolver.operator, access tokens remembered for a moment. */
  async operator(token: string): Promise<OperatorActor> {
    if (!this.revocations.live) return this.actors.operator(token);
    const now = Date.now();
    const hit = this.entries.get(token);
    // A revocation committed on another instance may still be on its way here: hear it before answering from memory.
    // (A request that arrived before the entry's end is answered by it, however long the round trip took.)
    if (hit && now < hit.until && (await this.revocations.caughtUp())) {
      // Still there unless a notice heard meanwhile dropped it (an availability changes the entry in place).
      if (this.entries.get(token) === hit && this.revocations.live) return hit.actor;
    }
    if (credentialKind(token) !== 'access') return this.actors.operator(token);
    const generation = this.revocations.generation;
    const changes: AvailabilityChange[] = [];
    this.loading.add(changes);
    let actor: OperatorActor;
    try {
      actor = await this.actors.operator(token);
    } finally {
      this.loading.delete(changes);
    }
    for (const change of changes) actor = following(actor, change);
    const admitted = actor.orgId === null || actor.membership?.status === 'accepted';
    // A revocation, or a lost listener, while the database was read: that answer may already be stale.
    if (admitted && generation === this.revocations.generation) {
      if (this.entries.size >= this.maxEntries) this.sweep(now);
      const until = Math.min(now + TTL_MS, actor.tokenExpiresAt * 1000, actor.sessionExpiresAt ?? Infinity);
      this.entries.set(token, { actor, until });
    }
    return actor;
  }

  private sweep(now: number): void {
    for (const [token, entry] of this.entries) if (now >= entry.until) this.entries.delete(token);
    // Still full of live entries: start over rather than grow without bound.
    if (this.entries.size >= this.maxEntries) this.entries.clear();
  }
}
