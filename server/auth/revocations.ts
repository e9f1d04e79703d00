// Revocations of access (logout, reuse detection, password change, suspension, removal, role change, a deleted
// organization) as every instance hears them: from this instance's domain events, and from the others through
// PostgreSQL NOTIFY, whether Redis is up or not. The remembered callers (callerCache.ts) drop what they name, and
// follow an agent's chosen availability the same way.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import pg from 'pg';
import type { Availability } from '../../db/models/Membership.js';
import type { DomainEventBus } from '../events.js';
import type { Logger } from '../logger.js';

/** The PostgreSQL channel revocations travel on between instances. */
export const REVOCATION_CHANNEL = 'caller_revoked';
/** The listening connection's name in `pg_stat_activity`. */
export const REVOCATION_LISTENER = 'support-revocations';
const RECONNECT_MS = 1_000;
/** A catch-up slower than this (a stalled listening connection) is given up on: the caller is read from the database. */
const CATCH_UP_MS = 1_000;

/**
 * Who lost access: the tokens of some sessions, every token of a user, a user's tokens for one organization, every
 * token of an organization, or (while deaf) anyone.
 */
export type Revocation = { sessionIds: string[] } | { userId: string } | { organizationId: string; userId?: string } | { everyone: true };

/** Not a revocation: the availability an agent chose (busy, away, online), which a remembered membership follows. */
export interface AvailabilityChange {
  organizationId: string;
  userId: string;
  availability: Availability;
}

export type CallerNotice = Revocation | AvailabilityChange;

/**
 * A NOTIFY payload must stay under 8000 bytes: past this many sessions (a password change of a user signed in
 * everywhere) the notice names the user instead, which drops a little more than needed.
 */
const MAX_SESSIONS_PER_NOTICE = 100;

/** A revocation as a revoking transaction tells it: sessions come with their user. */
export type RevocationNotice = { sessionIds: string[]; userId: string } | { userId: string } | { organizationId: string; userId?: string };

/** The notice as it can travel: a long list of sessions becomes its user. */
function wire(notice: RevocationNotice): Revocation {
  if ('sessionIds' in notice && notice.sessionIds.length > MAX_SESSIONS_PER_NOTICE) return { userId: notice.userId };
  return notice;
}

/**
 * `local`: one process serves the database (embedded), domain events are every revocation there is. `listen`:
 * PostgreSQL shared by instances, revocations also come by NOTIFY. `off`: nothing is cached (behind a pooler that
 * pools by transaction, where LISTEN cannot work).
 */
export type RevocationMode = 'local' | 'listen' | 'off';

export interface RevocationDeps {
  events: DomainEventBus;
  knex: Knex;
  logger: Logger;
  mode: RevocationMode;
  /** The database the instances share (`listen`). */
  databaseUrl?: string | null;
}

/**
 * Hears every revocation that concerns a cached caller, made here (domain events) or on another instance
 * (PostgreSQL NOTIFY on REVOCATION_CHANNEL, sent after the revoking transaction committed). `live` is true only
 * while this instance is sure to hear them all: with the embedded database always (one process serves it); on
 * PostgreSQL while the listening connection is up and has received its own probe (a pooler that cannot LISTEN
 * never delivers it, so nothing is cached behind one).
 */
export class Revocations {
  private listeners = new Set<(notice: CallerNotice) => void>();
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | undefined;
  private probe: string | null = null;
  live: boolean;
  /** Bumped by every revocation and every change of `live`: an answer loaded across a bump is not kept. */
  generation = 0;
  /** The catch-up query on the listening connection now, and the one the callers that came since wait for. */
  private catchUpSent: Promise<boolean> | null = null;
  private catchUpNext: Promise<boolean> | null = null;

  constructor(
    private readonly deps: RevocationDeps,
  ) {
    this.live = deps.mode === 'local';
    // This instance's own revocations, as they commit. On PostgreSQL the revoking transaction has also sent its notice
    // (noticeRevocation), which every instance hears, this one included: that notice is what the others rely on.
    deps.events.on('session.revoked', ({ sessionIds }) => this.apply({ sessionIds }));
    deps.events.on('membership.changed', ({ organizationId, userId }) => userId && this.apply({ organizationId, userId }));
    deps.events.on('organization.deleted', ({ organizationId }) => this.apply({ organizationId }));
    // Only a choice carries `availability` (AgentService.setStatus); a first or last socket repeats the stored one
    // or says offline, so it costs no notice on the connect path. A choice is no transaction's: it is told from here.
    deps.events.on('presence.changed', ({ organizationId, userId, availability }) => {
      if (!availability) return;
      const change: AvailabilityChange = { organizationId, userId, availability: availability as Availability };
      this.apply(change);
      if (deps.mode === 'listen') {
        deps.knex.raw('select pg_notify(?, ?)', [REVOCATION_CHANNEL, JSON.stringify(change)]).catch((err: Error) => deps.logger.warn({ err }, 'could not tell other instances of an availability'));
      }
    });
  }

  onNotice(listener: (notice: CallerNotice) => void): void {
    this.listeners.add(listener);
  }

  private apply(notice: CallerNotice): void {
    // An availability ends no one's access: loads in flight stay worth keeping (the cache corrects them).
    if (!('availability' in notice)) this.generation += 1;
    for (const listener of this.listeners) listener(notice);
  }

  private setLive(live: boolean): void {
    if (this.live === live) return;
    this.live = live;
    this.generation += 1;
    // Whatever was kept while revocations could be missed is dropped: everything.
    for (const listener of this.listeners) listener({ everyone: true });
  }

  /**
   * Resolves true once every notice committed before the call has been applied here, false if that cannot be known
   * soon (no listening connection, or it stalls). A notice reaches an instance a moment after its commit, while a
   * revoking request may already have answered; PostgreSQL delivers the notices pending for a listener before it
   * answers that connection's next query, so one round trip on the listening connection, sent after the call, closes
   * that moment. Callers that come while a round trip is under way share the next one, so a burst costs two.
   */
  caughtUp(): Promise<boolean> {
    if (this.deps.mode === 'local') return Promise.resolve(true);
    // (Callers ask only while `live`, so a listening connection is there; a lost one fails its query: false.)
    const client = this.client;
    if (!client) return Promise.resolve(false);
    if (this.catchUpNext) return this.catchUpNext;
    if (!this.catchUpSent) return this.sendCatchUp(client);
    // The round trip under way may have been sent before this caller's revocation committed: wait for the next.
    const next = this.catchUpSent.then(() => {
      this.catchUpNext = null;
      return this.sendCatchUp(client);
    });
    this.catchUpNext = next;
    return next;
  }

  /** One round trip on the listening connection; only one is under way at a time (the next is sent once it ends). */
  private sendCatchUp(client: pg.Client): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const answered = client.query('select 1').then(() => true, () => false);
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), CATCH_UP_MS).unref();
    });
    const sent = Promise.race([answered, late]).then((ok) => {
      clearTimeout(timer);
      this.catchUpSent = null;
      return ok;
    });
    this.catchUpSent = sent;
    return sent;
  }

  start(): void {
    if (this.deps.mode !== 'listen') return;
    void this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.deps.databaseUrl ?? undefined, application_name: REVOCATION_LISTENER });
    this.client = client;
    const lost = () => {
      if (this.client !== client) return;
      this.client = null;
      this.setLive(false);
      client.end().catch(() => undefined);
      this.timer = setTimeout(() => void this.connect(), RECONNECT_MS).unref();
    };
    // An end this instance did not ask for is reported as an error first (pg: "Connection terminated unexpectedly").
    client.on('error', lost);
    client.on('notification', (n) => {
      // (This connection listens on REVOCATION_CHANNEL only.) A payload that is not a notice is ignored: thrown from
      // here, an error would end the process.
      if (!n.payload) return;
      let r: CallerNotice & { probe?: string };
      try {
        r = JSON.parse(n.payload);
      } catch {
        return;
      }
      if (typeof r !== 'object' || r === null) return;
      if (r.probe !== undefined) {
        if (r.probe === this.probe && this.client === client) this.setLive(true);
        return;
      }
      this.apply(r);
    });
    try {
      await client.connect();
      await client.query(`listen ${REVOCATION_CHANNEL}`);
      // Sent through the pool, as revocations are: heard here only if notifications really reach this connection.
      this.probe = randomUUID();
      await this.deps.knex.raw('select pg_notify(?, ?)', [REVOCATION_CHANNEL, JSON.stringify({ probe: this.probe })]);
    } catch (err) {
      this.deps.logger.debug({ err }, 'the revocation listener could not connect; callers are not cached meanwhile');
      lost();
    }
  }

  /**
   * Remembering stops with the instance. A reconnect planned is cancelled; a connection under way is `this.client` and
   * is ended here, so its `lost()` finds itself replaced and plans none.
   */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    const client = this.client;
    this.client = null;
    this.live = false;
    await client?.end().catch(() => undefined);
  }
}

/**
 * Tells the other instances, inside the transaction that revokes: PostgreSQL sends the notice as it commits, so it
 * is on its way before the revoking request answers (each instance, this one included, acts on it when its event loop
 * reads it). Nothing to do on the embedded database, which one process serves (its domain events tell the memory).
 */
export async function noticeRevocation(db: Knex | Knex.Transaction, revocation: RevocationNotice): Promise<void> {
  if ((db.client as { config: { client: unknown } }).config.client !== 'pg') return;
  await db.raw('select pg_notify(?, ?)', [REVOCATION_CHANNEL, JSON.stringify(wire(revocation))]);
}
