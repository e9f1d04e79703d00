// The read sessions analytics answers run in: one connection, one read-only transaction with its own settings,
// knex-style placeholders numbered for prepared statements, and the connection given back whatever happens.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';

describe('Analytics read sessions', function () {
  this.timeout(60_000);
  const db = () => sharedServer().server.db;

  it('numbers placeholders in order and runs the same text again in a new session', async () => {
    for (const [a, b] of [[2, 3], [40, 2]] as const) {
      const rows = await db().readOnly([], async (s) => (await s.raw('select ?::int + ?::int as n, ?::text as t', [a, b, 'x'])).rows);
      expect(rows).to.deep.equal([{ n: a + b, t: 'x' }]);
    }
  });

  it('runs queued statements in one transaction with its settings, which end with it', async () => {
    const inside = await db().readOnly(['jit = off', "application_name = 'analytics read'"], async (s) => {
      const [xid, settings] = await Promise.all([
        s.raw('select txid_current_if_assigned() is null as unassigned, now() as started'),
        s.raw(`select current_setting('jit') as jit, current_setting('application_name') as name, current_setting('transaction_read_only') as ro, now() as started`),
      ]);
      return { xid: xid.rows[0]!, settings: settings.rows[0]! };
    });
    expect(inside.settings).to.include({ jit: 'off', name: 'analytics read', ro: 'on' });
    // now() is the transaction's start: both statements ran in the same one.
    expect(new Date(inside.settings.started as Date).getTime()).to.equal(new Date(inside.xid.started as Date).getTime());
    const after = (await db().knex.raw(`select current_setting('application_name') as name, current_setting('transaction_read_only') as ro`)).rows[0];
    expect(after).to.deep.equal({ name: (await db().knex.raw(`select reset_val from pg_settings where name = 'application_name'`)).rows[0].reset_val, ro: 'off' });
  });

  it('refuses writes, rolls back and gives the connection back after a failing statement, however many times', async () => {
    for (let i = 0; i < 12; i++) {
      const failed = await db().readOnly([], async (s) => {
        await s.raw(`insert into organizations (name, slug) values ('x', ?)`, [`read-only-${i}`]);
      }).then(() => null, (err: Error) => err);
      expect(failed?.message, `attempt ${i}`).to.match(/read-only transaction/);
    }
    // Twelve sessions failed on a pool of at most ten connections: each was released, or this would wait forever.
    const [{ n }] = (await db().readOnly([], async (s) => (await s.raw(`select count(*)::int as n from organizations where slug like 'read-only-%'`)).rows)) as { n: number }[];
    expect(n).to.equal(0);
  });

  it('rejects what the function throws after the statements it started have finished', async () => {
    let finished = false;
    const err = await db().readOnly([], async (s) => {
      void s.raw('select pg_sleep(0.05)').then(() => { finished = true; });
      throw new Error('stop');
    }).then(() => null, (e: Error) => e);
    expect(err?.message).to.equal('stop');
    expect(finished).to.equal(true);
  });
});
