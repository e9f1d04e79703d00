// Ticket rules: every status transition allowed and every one refused, numbers per organization under concurrent
// creates (no duplicates, no gaps, a rolled-back create gives its number back), and merging (final, nothing half done).
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { expectError } from './helpers/tenancy.js';
import { createTicket, events, ok, patchTicket } from './helpers/tickets.js';
import { refuseWrites } from './helpers/refusals.js';

const SETTABLE = ['open', 'in_progress', 'pending', 'resolved', 'closed'] as const;
const ALL = [...SETTABLE, 'merged'] as const;
/** The contract's table, written out independently of the server's. */
const ALLOWED: Record<string, string[]> = {
  open: ['in_progress', 'pending', 'resolved', 'closed'],
  in_progress: ['open', 'pending', 'resolved', 'closed'],
  pending: ['open', 'in_progress', 'resolved', 'closed'],
  resolved: ['open', 'closed'],
  closed: [],
  merged: [],
};
/** A way to reach each status from open through allowed steps. */
const PATH: Record<string, string[]> = { open: [], in_progress: ['in_progress'], pending: ['pending'], resolved: ['resolved'], closed: ['closed'] };

describe('Tickets: status transitions', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  async function ticketIn(status: string): Promise<any> {
    const t = await createTicket(owner);
    if (status === 'merged') {
      const target = await createTicket(owner);
      ok(await owner.api.post(`/tickets/${t.id}/merge`, { targetTicketId: target.id }, { token: owner.accessToken }), 200);
      return ok(await owner.api.get(`/tickets/${t.id}`, { token: owner.accessToken }), 200);
    }
    let current = t;
    for (const step of PATH[status]!) current = ok(await patchTicket(owner, t.id, { status: step }), 200);
    expect(current.status).to.equal(status);
    return current;
  }

  for (const from of ALL) {
    for (const to of SETTABLE) {
      if (from === to) continue;
      const allowed = ALLOWED[from]!.includes(to);
      it(`${from} -> ${to}: ${allowed ? '200' : '400 invalid_transition, nothing changes'}`, async () => {
        const t = await ticketIn(from);
        const before = await events(owner, t.id);
        const res = await patchTicket(owner, t.id, { status: to });
        if (allowed) {
          const changed = ok(res, 200);
          expect(changed.status).to.equal(to);
          if (to === 'resolved') expect(changed.resolvedAt).to.be.a('string');
          if (to === 'open' || to === 'in_progress' || to === 'pending') expect(changed.resolvedAt).to.equal(null);
          if (to === 'closed') expect(changed.closedAt).to.be.a('string');
          const after = await events(owner, t.id);
          expect(after.at(-1)).to.include({ type: 'status_changed' });
          expect(after.at(-1).data).to.deep.equal({ from, to });
        } else {
          expectError(res, 400, 'invalid_transition');
          expect(ok(await owner.api.get(`/tickets/${t.id}`, { token: owner.accessToken }), 200)).to.deep.equal(t);
          expect(await events(owner, t.id)).to.deep.equal(before);
        }
      });
    }
  }

  it('the current status again changes nothing (200), also for a closed ticket', async () => {
    const t = await ticketIn('closed');
    expect(ok(await patchTicket(owner, t.id, { status: 'closed' }), 200)).to.deep.equal(t);
  });

  it('a merged ticket cannot change at all; a closed one keeps accepting field edits', async () => {
    const merged = await ticketIn('merged');
    expectError(await patchTicket(owner, merged.id, { title: 'Renamed' }), 400, 'invalid_transition');
    const closed = await ticketIn('closed');
    expect(ok(await patchTicket(owner, closed.id, { tags: ['late'] }), 200).tags).to.deep.equal(['late']);
  });
});

describe('Tickets: numbers per organization', () => {
  it('numbers concurrent creates 1..n without duplicates or gaps, separately per organization', async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const n = 16;
    const created = await Promise.all([
      ...Array.from({ length: n }, (_, i) => createTicket(a, { title: `A${i}` })),
      ...Array.from({ length: n / 2 }, (_, i) => createTicket(b, { title: `B${i}` })),
    ]);
    const numbersOf = (prefix: string) => created.filter((t) => t.title.startsWith(prefix)).map((t) => t.number).sort((x, y) => x - y);
    expect(numbersOf('A')).to.deep.equal(Array.from({ length: n }, (_, i) => i + 1));
    expect(numbersOf('B')).to.deep.equal(Array.from({ length: n / 2 }, (_, i) => i + 1));
  });

  it('a create that fails after taking a number gives it back (the next ticket has no gap)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const first = await createTicket(owner);
    expect(first.number).to.equal(1);
    // The ticket insert fails after the counter moved: the whole create must roll back.
    const knex = server.db.knex;
    const refusal = await refuseWrites(knex, { table: 'tickets', on: 'insert', when: `new.organization_id = '${owner.orgId}' and new.title = 'explode'` });
    try {
      const res = await owner.api.post('/tickets', { title: 'explode' }, { token: owner.accessToken });
      expectError(res, 500, 'internal_error');
    } finally {
      await refusal.lift();
    }
    expect((await createTicket(owner)).number).to.equal(2);
    const all = ok(await owner.api.get('/tickets', { token: owner.accessToken }), 200);
    expect(all.map((t: any) => t.number)).to.deep.equal([2, 1]);
  });
});

describe('Tickets: merge', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  const merge = (sourceId: string, targetTicketId: unknown) => owner.api.post(`/tickets/${sourceId}/merge`, { targetTicketId }, { token: owner.accessToken });
  const get = async (id: string) => ok(await owner.api.get(`/tickets/${id}`, { token: owner.accessToken }), 200);

  it('merges the source into the target (200 target): source merged and final, both timelines record it', async () => {
    const source = await createTicket(owner, { title: 'Dup' });
    const target = await createTicket(owner, { title: 'Main' });
    const earlier = await createTicket(owner, { title: 'Earlier dup' });
    ok(await merge(earlier.id, source.id), 200);
    const answered = ok(await merge(source.id, target.id), 200);
    expect(answered).to.include({ id: target.id, status: 'open', mergedIntoId: null });
    const merged = await get(source.id);
    expect(merged).to.include({ status: 'merged', mergedIntoId: target.id });
    expect(merged.closedAt).to.be.a('string');
    // What was merged into the source now points at the target.
    expect((await get(earlier.id)).mergedIntoId).to.equal(target.id);
    expect((await events(owner, source.id)).at(-1)).to.deep.include({ type: 'merged', data: { direction: 'into', ticketId: target.id, number: target.number, from: 'open' } });
    expect((await events(owner, target.id)).at(-1)).to.deep.include({ type: 'merged', data: { direction: 'from', ticketId: source.id, number: source.number } });
    // Final: no status, no second merge, no edits.
    for (const status of SETTABLE) expectError(await patchTicket(owner, source.id, { status }), 400, 'invalid_transition');
    expectError(await merge(source.id, (await createTicket(owner)).id), 400, 'invalid_transition');
    expectError(await merge((await createTicket(owner)).id, source.id), 400, 'invalid_transition');
  });

  it('refuses itself (400), a closed ticket on either side (400 invalid_transition), bad and missing targets (400/404)', async () => {
    const t = await createTicket(owner);
    expectError(await merge(t.id, t.id), 400, 'validation_failed');
    const closed = await createTicket(owner);
    ok(await patchTicket(owner, closed.id, { status: 'closed' }), 200);
    expectError(await merge(t.id, closed.id), 400, 'invalid_transition');
    expectError(await merge(closed.id, t.id), 400, 'invalid_transition');
    expectError(await merge(t.id, 'nope'), 400, 'validation_failed');
    expectError(await owner.api.post(`/tickets/${t.id}/merge`, {}, { token: owner.accessToken }), 400, 'validation_failed');
    expectError(await merge(t.id, '00000000-0000-4000-8000-000000000000'), 404, 'not_found');
    expect(await get(t.id)).to.include({ status: 'open', mergedIntoId: null });
    expect(await events(owner, t.id)).to.have.length(1);
  });

  it('leaves nothing half done when a merge fails midway (source untouched, no events on either side)', async () => {
    const { server } = sharedServer();
    const source = await createTicket(owner, { title: 'Half' });
    const target = await createTicket(owner, { title: 'Done' });
    const sourceEvents = await events(owner, source.id);
    const targetEvents = await events(owner, target.id);
    // The target's merge event is written after the source changed: make exactly that insert fail.
    const knex = server.db.knex;
    const refusal = await refuseWrites(knex, { table: 'ticket_events', on: 'insert', when: `new.ticket_id = '${target.id}' and new.type = 'merged'` });
    try {
      expectError(await merge(source.id, target.id), 500, 'internal_error');
    } finally {
      await refusal.lift();
    }
    expect(await get(source.id)).to.deep.equal(source);
    expect(await get(target.id)).to.deep.equal(target);
    expect(await events(owner, source.id)).to.deep.equal(sourceEvents);
    expect(await events(owner, target.id)).to.deep.equal(targetEvents);
    // And the same merge works once nothing stands in its way.
    ok(await merge(source.id, target.id), 200);
    expect((await get(source.id)).status).to.equal('merged');
  });
});
