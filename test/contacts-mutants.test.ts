// Contact merges, the rules the merge tests leave open: `prefer.attributes`, the email's verification travelling with
// the email, the later of the two activities, the limits of tags and attributes taken together, and the open
// duplicate conflict that the merge of its two contacts settles; and the fields: blank text is no text, a phone
// that parses but cannot be a number is refused.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { uniqueEmail } from './helpers/factories.js';
import { expectError } from './helpers/tenancy.js';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent } from './helpers/sockets.js';

describe('Contact merge: what the survivor keeps', () => {
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  const merge = (targetId: string, sourceId: string, prefer?: Record<string, string>) =>
    as(t.agent).post(`/contacts/${targetId}/merge`, { sourceContactId: sourceId, ...(prefer ? { prefer } : {}) });

  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
    await defineAttribute(t.admin, { key: 'region', label: 'Region', type: 'text' });
  });

  it('prefer.attributes: source lets the source win key by key; keys only the survivor has stay', async () => {
    const target = await createContact(t.agent, { name: 'T', attributes: { plan: 'pro', region: 'north' } });
    const source = await createContact(t.agent, { name: 'S', attributes: { plan: 'free', seats: 3 } });
    const survivor = ok(await merge(target.id, source.id, { attributes: 'source' }), 200);
    expect(survivor.attributes).to.deep.equal({ plan: 'free', seats: 3, region: 'north' });
  });

  it("the email's verification goes with the email: taken from the source with it, kept with the survivor's", async () => {
    const verified = new Date('2026-01-02T03:04:05.000Z');
    const pair = async () => {
      const target = await createContact(t.agent, { name: 'T', email: uniqueEmail('t') });
      const source = await createContact(t.agent, { name: 'S', email: uniqueEmail('s') });
      await knex()('contacts').where({ id: target.id }).update({ email_verified_at: verified });
      return { target, source };
    };
    const kept = await pair();
    const keptSurvivor = ok(await merge(kept.target.id, kept.source.id), 200);
    expect(keptSurvivor).to.include({ email: kept.target.email, emailVerifiedAt: verified.toISOString() });
    const taken = await pair();
    const takenSurvivor = ok(await merge(taken.target.id, taken.source.id, { email: 'source' }), 200);
    expect(takenSurvivor).to.include({ email: taken.source.email, emailVerifiedAt: null });
  });

  it('the last activity is the later of the two, whichever side it is on', async () => {
    const early = new Date('2026-01-01T00:00:00.000Z');
    const late = new Date('2026-06-01T00:00:00.000Z');
    const cases: Array<[Date | null, Date | null, Date | null]> = [
      [early, late, late],
      [late, early, late],
      [null, early, early],
      [early, null, early],
      [null, null, null],
    ];
    for (const [i, [onTarget, onSource, expected]] of cases.entries()) {
      const target = await createContact(t.agent, { name: `T${i}` });
      const source = await createContact(t.agent, { name: `S${i}` });
      await knex()('contacts').where({ id: target.id }).update({ last_activity_at: onTarget });
      await knex()('contacts').where({ id: source.id }).update({ last_activity_at: onSource });
      const survivor = ok(await merge(target.id, source.id), 200);
      expect(survivor.lastActivityAt, `case ${i}`).to.equal(expected ? expected.toISOString() : null);
    }
  });

  it('exactly 50 tags together merge; 51 are refused with the count in the words', async () => {
    const target = await createContact(t.agent, { name: 'T', tags: Array.from({ length: 25 }, (_, i) => `t${i}`) });
    const source = await createContact(t.agent, { name: 'S', tags: Array.from({ length: 25 }, (_, i) => `s${i}`) });
    expect(ok(await merge(target.id, source.id), 200).tags).to.have.length(50);
    const third = await createContact(t.agent, { name: 'U', tags: ['one more'] });
    const res = await merge(target.id, third.id);
    expectError(res, 400, 'validation_failed');
    expect(res.body.message).to.equal('The merged contact would have 51 tags (at most 50)');
    expect(res.body.error.details).to.deep.equal([{ field: 'tags', message: 'too many tags together' }]);
  });

  it('more than 100 attributes together are refused and nothing moves; exactly 100 merge', async () => {
    const own = await contactsTenant();
    await knex()('contact_attribute_definitions').insert(Array.from({ length: 101 }, (_, i) => ({ organization_id: own.owner.orgId, key: `k${i}`, label: `K${i}`, type: 'text' })));
    const attrs = (from: number, to: number) => Object.fromEntries(Array.from({ length: to - from }, (_, i) => [`k${from + i}`, 'v']));
    const target = await createContact(own.agent, { name: 'T', attributes: attrs(0, 60) });
    const source = await createContact(own.agent, { name: 'S', attributes: attrs(50, 101) });
    const res = await as(own.agent).post(`/contacts/${target.id}/merge`, { sourceContactId: source.id });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.details).to.deep.equal([{ field: 'attributes', message: 'too many attributes together' }]);
    expect(ok(await as(own.agent).get(`/contacts/${source.id}`), 200).attributes).to.deep.equal(attrs(50, 101));
    const exact = await createContact(own.agent, { name: 'E', attributes: attrs(60, 100) });
    expect(Object.keys(ok(await as(own.agent).post(`/contacts/${target.id}/merge`, { sourceContactId: exact.id }), 200).attributes)).to.have.length(100);
  });

  it('settles the open duplicate conflict between the two contacts, and only that one', async () => {
    const target = await createContact(t.agent, { name: 'T', email: uniqueEmail('t') });
    const source = await createContact(t.agent, { name: 'S', email: uniqueEmail('s') });
    const third = await createContact(t.agent, { name: 'U' });
    const conflict = (contactId: string, otherContactId: string | null, kind = 'duplicate', status = 'open') => ({
      id: randomUUID(), organization_id: t.owner.orgId, kind, status, contact_id: contactId, other_contact_id: otherContactId,
      field: 'email', current_value: JSON.stringify('a'), proposed_value: JSON.stringify('b'), source: 'ai',
    });
    const rows = {
      pair: conflict(source.id, target.id),
      dismissed: conflict(target.id, source.id, 'duplicate', 'dismissed'),
      withThird: conflict(third.id, source.id),
      field: conflict(target.id, null, 'field'),
    };
    await knex()('contact_conflicts').insert(Object.values(rows));
    ok(await merge(target.id, source.id), 200);
    const all = ok(await as(t.agent).get(`/contacts/conflicts?status=all&limit=100`), 200) as any[];
    const byId = new Map(all.map((c) => [c.id, c]));
    expect(byId.get(rows.pair.id)).to.include({ status: 'applied', contactId: target.id, otherContactId: target.id, resolvedBy: t.agent.userId });
    expect(byId.get(rows.pair.id).resolvedAt).to.be.a('string');
    expect(byId.get(rows.dismissed.id)).to.include({ status: 'dismissed', resolvedBy: null });
    expect(byId.get(rows.withThird.id)).to.include({ status: 'open', contactId: third.id, otherContactId: target.id });
    expect(byId.get(rows.field.id)).to.include({ status: 'open', contactId: target.id });
  });
});

describe('Contact fields: blank text and impossible phones', () => {
  let t: ContactsTenant;
  before(async () => {
    t = await contactsTenant();
  });

  it('a name or company of spaces only is none (null), on create and on change', async () => {
    const c = await createContact(t.agent, { name: '   ', company: ' \t ' });
    expect(c).to.include({ name: null, company: null });
    const named = ok(await as(t.agent).patch(`/contacts/${c.id}`, { name: 'Ann', company: 'Acme' }), 200);
    expect(named).to.include({ name: 'Ann', company: 'Acme' });
    expect(ok(await as(t.agent).patch(`/contacts/${c.id}`, { name: '  ', company: '  ' }), 200)).to.include({ name: null, company: null });
  });

  it('refuses a phone that parses but is too short to be a number (400), with the field named', async () => {
    for (const phone of ['+4915', '+1 555']) {
      const res = await as(t.agent).post('/contacts', { name: 'P', phone });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).to.deep.equal([{ field: 'phone', message: 'must be an international phone number, e.g. +49 151 23456789' }]);
    }
  });
});

describe('Contacts: reads, changes, tags and deletes, word by word', () => {
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  const track = closeAfterEach();
  before(async () => {
    t = await contactsTenant();
  });

  it('an unknown contact is 404 "Contact not found" to read, change, delete (one or many) and tag', async () => {
    const known = await createContact(t.agent, { name: 'Known' });
    const unknown = randomUUID();
    const calls = [
      () => as(t.agent).get(`/contacts/${unknown}`),
      () => as(t.agent).patch(`/contacts/${unknown}`, { name: 'X' }),
      () => as(t.admin).delete(`/contacts/${unknown}`),
      () => as(t.admin).delete('/contacts', { ids: [known.id, unknown] }),
      () => as(t.agent).post(`/contacts/${unknown}/tags`, { tag: 'x' }),
      () => as(t.agent).post('/contacts/tags', { ids: [known.id, unknown], tags: ['x'] }),
    ];
    for (const [i, call] of calls.entries()) {
      const res = await call();
      expectError(res, 404, 'not_found');
      expect(res.body.message, `call ${i}`).to.equal('Contact not found');
    }
    // All or nothing: the known contact is neither deleted nor tagged.
    expect(ok(await as(t.agent).get(`/contacts/${known.id}`), 200).tags).to.deep.equal([]);
  });

  it('null clears a field and a phone of blanks is none; a phone with spaces around it is read', async () => {
    const phone = `+49151${String(Date.now() % 1e8).padStart(8, '0')}`;
    const c = await createContact(t.agent, { name: 'Clear Me', email: uniqueEmail('clear'), phone: `  ${phone}  `, company: 'Clear Co' });
    expect(c.phone).to.equal(phone);
    const cleared = ok(await as(t.agent).patch(`/contacts/${c.id}`, { name: null, email: null, phone: null, company: null }), 200);
    expect(cleared).to.include({ name: null, email: null, phone: null, company: null });
    const blank = ok(await as(t.agent).patch(`/contacts/${c.id}`, { name: 'Blank Phone', phone: '   ' }), 200);
    expect(blank).to.include({ name: 'Blank Phone', phone: null });
    expect(ok(await as(t.agent).post('/contacts', { name: 'Empty Phone', phone: '' }), 201).phone).to.equal(null);
  });

  it('notes are listed newest first; an unknown note is 404 "Note not found"', async () => {
    const c = await createContact(t.agent, { name: 'Noted' });
    const ids: string[] = [];
    for (const content of ['first', 'second', 'third']) ids.push(ok(await as(t.agent).post(`/contacts/${c.id}/notes`, { content }), 201).id);
    // Times apart, so the order is the time's and not the tie-break's.
    for (const [i, id] of ids.entries()) await knex()('contact_notes').where({ id }).update({ created_at: new Date(Date.UTC(2026, 0, 1 + i)) });
    expect(ok(await as(t.agent).get(`/contacts/${c.id}/notes`), 200).map((n: any) => n.content)).to.deep.equal(['third', 'second', 'first']);
    for (const res of [await as(t.agent).patch(`/contacts/${c.id}/notes/${randomUUID()}`, { content: 'x' }), await as(t.agent).delete(`/contacts/${c.id}/notes/${randomUUID()}`)]) {
      expectError(res, 404, 'not_found');
      expect(res.body.message).to.equal('Note not found');
    }
  });

  it('a change that names no email keeps the email, its verification and every field not named', async () => {
    const verified = new Date('2026-01-02T03:04:05.000Z');
    const phone = `+49152${String(Date.now() % 1e8).padStart(8, '0')}`;
    const c = await createContact(t.agent, { name: 'Verified', email: uniqueEmail('kept'), phone });
    await knex()('contacts').where({ id: c.id }).update({ email_verified_at: verified });
    const changed = ok(await as(t.agent).patch(`/contacts/${c.id}`, { company: 'Other Co' }), 200);
    // Fields the change does not name stay as they were.
    expect(changed).to.include({ company: 'Other Co', emailVerifiedAt: verified.toISOString(), email: c.email, phone, name: 'Verified' });
  });

  it('says whether a tag was added or removed; removing one tag keeps the others', async () => {
    const c = await createContact(t.agent, { name: 'Tagged', tags: ['keep', 'drop'] });
    const added = await as(t.agent).post(`/contacts/${c.id}/tags`, { tag: 'New' });
    expect([added.body.message, ok(added, 200).tags]).to.deep.equal(['Tag added', ['keep', 'drop', 'new']]);
    const again = await as(t.agent).post(`/contacts/${c.id}/tags`, { tag: 'new' });
    expect([again.body.message, ok(again, 200).tags]).to.deep.equal(['Tag already present', ['keep', 'drop', 'new']]);
    const removed = await as(t.agent).delete(`/contacts/${c.id}/tags/drop`);
    expect([removed.body.message, ok(removed, 200).tags]).to.deep.equal(['Tag removed', ['keep', 'new']]);
    const absent = await as(t.agent).delete(`/contacts/${c.id}/tags/drop`);
    expect([absent.body.message, ok(absent, 200).tags]).to.deep.equal(['Tag not present', ['keep', 'new']]);
  });

  it('a tag past the 50th is refused with the contact and its count named', async () => {
    const c = await createContact(t.agent, { name: 'Full', tags: Array.from({ length: 50 }, (_, i) => `t${i}`) });
    const res = await as(t.agent).post(`/contacts/${c.id}/tags`, { tag: 'one more' });
    expectError(res, 400, 'validation_failed');
    expect(res.body.message).to.equal('A contact has at most 50 tags');
    expect(res.body.error.details).to.deep.equal([{ field: 'tags', message: `contact ${c.id} would have 51 tags` }]);
  });

  it('a contact made inside a ticket\'s transaction that is then refused is never announced', async () => {
    const socket = track(await connectOk(sharedServer().baseUrl, t.owner.orgId, t.agent.accessToken));
    const heard = collect(socket, 'contact_created');
    const email = uniqueEmail('rolled-back');
    // The requester's contact is made first, then the unknown conversation refuses the ticket: all of it rolls back.
    const res = await as(t.agent).post('/tickets', { title: 'Refused', requester: { email, name: 'Never Was' }, conversationId: randomUUID() });
    expectError(res, 404, 'not_found');
    expect(await knex()('contacts').where({ organization_id: t.owner.orgId, email })).to.have.length(0);
    const barrier = nextEvent(socket, 'contact_created', (p) => p.contact.name === 'Announce Barrier');
    await createContact(t.agent, { name: 'Announce Barrier' });
    await barrier;
    expect(heard.map((p) => p.contact.name)).to.deep.equal(['Announce Barrier']);
  });

  it('bulk tags announce each contact with its own identities', async () => {
    const socket = track(await connectOk(sharedServer().baseUrl, t.owner.orgId, t.agent.accessToken));
    const [a, b] = [
      await createContact(t.agent, { name: 'Bulk A', identities: [{ channel: 'telegram', externalId: `a-${randomUUID()}` }] }),
      await createContact(t.agent, { name: 'Bulk B', identities: [{ channel: 'whatsapp', externalId: `b-${randomUUID()}` }] }),
    ];
    const heard = (id: string) => nextEvent(socket, 'contact_updated', (p) => p.contact.id === id && p.contact.tags.includes('bulk-heard'));
    const [ofA, ofB] = [heard(a.id), heard(b.id)];
    expect(ok(await as(t.agent).post('/contacts/tags', { ids: [a.id, b.id], tags: ['bulk-heard'] }), 200)).to.deep.equal({ updated: 2 });
    expect((await ofA).contact.identities.map((i: any) => i.externalId)).to.deep.equal([a.identities[0].externalId]);
    expect((await ofB).contact.identities.map((i: any) => i.externalId)).to.deep.equal([b.identities[0].externalId]);
  });

  it('filtered lists show each contact\'s identities; a search of blanks is no search', async () => {
    const own = await contactsTenant();
    const withId = await createContact(own.agent, { name: 'Has Identity', identities: [{ channel: 'sms', externalId: `s-${randomUUID()}` }] });
    const bare = await createContact(own.agent, { tags: ['only-a-tag'] });
    const filtered = ok(await as(own.agent).post('/contacts/filter?sort=name', { filters: [{ key: 'name', op: 'eq', value: 'Has Identity' }] }), 200);
    expect(filtered.map((c: any) => [c.id, c.identities.map((i: any) => i.externalId)])).to.deep.equal([[withId.id, [withId.identities[0].externalId]]]);
    const blank = await as(own.agent).get('/contacts?q=%20%20&sort=name');
    expect(ok(blank, 200).map((c: any) => c.id).sort()).to.deep.equal([withId.id, bare.id].sort());
    expect(blank.body.pagination.total).to.equal(2);
  });
});
