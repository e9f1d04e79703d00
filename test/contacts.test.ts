// /contacts: create (E.164, uniqueness), read, update (attributes merged per key), literal search, tags, sorts,
// structured filters, typed attributes and their definitions, limits, deletes (one and bulk, all or nothing).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { uniqueEmail } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';

describe('Contacts: create, read, update', () => {
  let t: ContactsTenant;
  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
    await defineAttribute(t.admin, { key: 'renews', label: 'Renews on', type: 'date' });
    await defineAttribute(t.admin, { key: 'vip', label: 'VIP', type: 'boolean' });
    await defineAttribute(t.admin, { key: 'site', label: 'Website', type: 'link' });
    await defineAttribute(t.admin, { key: 'notes', label: 'Notes', type: 'text' });
  });

  it('creates a contact (201) with a normalized phone, lowercase tags and typed attributes; GET answers the same', async () => {
    const email = uniqueEmail('Jane');
    const created = await createContact(t.agent, {
      name: ' Jane Doe ', email: email.toUpperCase(), phone: '+49 151 2345 6789', company: 'Acme', tags: ['VIP', 'vip', ' Beta '],
      attributes: { plan: 'pro', seats: 12, renews: '2027-01-31', vip: true, site: 'https://acme.example', notes: 'likes tea' },
      identities: [{ channel: 'whatsapp', externalId: '4915123456789' }],
    });
    expect(created).to.include({ name: 'Jane Doe', email: email.toLowerCase(), phone: '+4915123456789', company: 'Acme', emailVerifiedAt: null, lastActivityAt: null });
    expect(created.tags).to.deep.equal(['vip', 'beta']);
    expect(created.attributes).to.deep.equal({ plan: 'pro', seats: 12, renews: '2027-01-31', vip: true, site: 'https://acme.example', notes: 'likes tea' });
    expect(created.identities).to.deep.equal([{ channel: 'whatsapp', externalId: '4915123456789' }]);
    const got = ok(await as(t.agent).get(`/contacts/${created.id}`), 200);
    expect(got).to.deep.equal({ ...created, mergedFrom: [] });
  });

  it('refuses an unparsable phone (400) and answers 409 for a taken email (any case), phone (any spelling) or identity', async () => {
    expectError(await as(t.agent).post('/contacts', { phone: 'not a phone' }), 400, 'validation_failed');
    expectError(await as(t.agent).post('/contacts', { phone: '0151 2345' }), 400, 'validation_failed');
    const email = uniqueEmail('dup');
    await createContact(t.agent, { email, phone: '+44 20 7946 0018', identities: [{ channel: 'telegram', externalId: 'tg-1' }] });
    expectError(await as(t.agent).post('/contacts', { email: email.toUpperCase() }), 409, 'conflict');
    expectError(await as(t.agent).post('/contacts', { phone: '+442079460018' }), 409, 'conflict');
    expectError(await as(t.agent).post('/contacts', { identities: [{ channel: 'telegram', externalId: 'tg-1' }] }), 409, 'conflict');
    // Another organization may hold the same email and phone.
    const other = await contactsTenant();
    await createContact(other.agent, { email, phone: '+442079460018' });
    // PATCH to a taken value is 409 too.
    const second = await createContact(t.agent, { name: 'Second' });
    expectError(await as(t.agent).patch(`/contacts/${second.id}`, { email }), 409, 'conflict');
    expectError(await as(t.agent).patch(`/contacts/${second.id}`, { phone: '+44 (20) 7946-0018' }), 409, 'conflict');
  });

  it('checks attribute values against their definitions: undefined key, wrong type, unknown option, bad date or link are 400', async () => {
    for (const attributes of [{ nope: 'x' }, { seats: 'twelve' }, { plan: 'enterprise' }, { renews: 'soon' }, { vip: 'yes' }, { site: 'javascript:alert(1)' }, { notes: 5 }]) {
      const res = await as(t.agent).post('/contacts', { attributes });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details[0].field, JSON.stringify(attributes)).to.equal(`attributes.${Object.keys(attributes)[0]}`);
    }
  });

  it('PATCH merges attributes key by key, null deletes a key, tags replace; a changed email clears nothing else', async () => {
    const c = await createContact(t.agent, { name: 'Patchy', attributes: { plan: 'free', seats: 1 } });
    const updated = ok(await as(t.agent).patch(`/contacts/${c.id}`, { company: 'NewCo', attributes: { seats: 5, plan: null, vip: false }, tags: ['A'] }), 200);
    expect(updated.attributes).to.deep.equal({ seats: 5, vip: false });
    expect(updated).to.include({ name: 'Patchy', company: 'NewCo' });
    expect(updated.tags).to.deep.equal(['a']);
    expectError(await as(t.agent).patch(`/contacts/${c.id}`, { attributes: { undefinedKey: 1 } }), 400, 'validation_failed');
    expectError(await as(t.agent).patch(`/contacts/${c.id}`, {}), 400, 'validation_failed');
    expectError(await as(t.agent).patch(`/contacts/${c.id}`, { organizationId: randomUUID() }), 400, 'validation_failed');
    expect(ok(await as(t.agent).get(`/contacts/${c.id}`), 200).attributes).to.deep.equal({ seats: 5, vip: false });
  });

  it('limits: 51 tags, 101 attributes and a long text value are 400; exactly 50 tags pass', async () => {
    const many = Array.from({ length: 51 }, (_, i) => `t${i}`);
    expectError(await as(t.agent).post('/contacts', { tags: many }), 400, 'validation_failed');
    ok(await as(t.agent).post('/contacts', { tags: many.slice(0, 50) }), 201);
    const attrs = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, 'v']));
    expectError(await as(t.agent).post('/contacts', { attributes: attrs }), 400, 'validation_failed');
    expectError(await as(t.agent).post('/contacts', { attributes: { notes: 'x'.repeat(2001) } }), 400, 'validation_failed');
  });

  it('a conversation linked by email uses the normalized contact and marks activity', async () => {
    const email = uniqueEmail('linker');
    const c = await createContact(t.agent, { email, name: 'Linker' });
    const visitor = await newVisitor(t.owner);
    const { conversationId } = await startConversation(visitor);
    const linked = ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { email: email.toUpperCase(), phone: '+1 415 555 2671' }), 200);
    expect(linked.contactId).to.equal(c.id);
    const after = ok(await as(t.agent).get(`/contacts/${c.id}`), 200);
    expect(after.phone).to.equal('+14155552671');
    expect(after.lastActivityAt).to.be.a('string');
  });
});

describe('Contacts: list, literal search, tags, sorts and filters', () => {
  let t: ContactsTenant;
  const ids: Record<string, string> = {};
  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
    await defineAttribute(t.admin, { key: 'renews', label: 'Renews', type: 'date' });
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
    await defineAttribute(t.admin, { key: 'vip', label: 'VIP', type: 'boolean' });
    const rows = [
      { name: 'Alice 100% Real', email: 'alice@a.example', company: 'Percent_Co', tags: ['vip'], attributes: { seats: 10, renews: '2027-03-01', plan: 'pro', vip: true } },
      { name: 'Bob', email: 'bob@b.example', phone: '+49 151 11112222', company: 'Acme', tags: ['trial'], attributes: { seats: 2, renews: '2026-01-01', plan: 'free' } },
      { name: 'carol', email: 'carol@c.example', company: 'Back\\slash', attributes: { seats: 50 } },
      { name: 'Dave.*', email: 'dave@d.example', tags: ['vip', 'trial'] },
    ];
    for (const r of rows) ids[r.name] = (await createContact(t.agent, r)).id;
    // Another organization's contacts never appear.
    const other = await contactsTenant();
    await createContact(other.agent, { name: 'Alice 100% Real', tags: ['vip'] });
  });

  const names = (data: any[]) => data.map((c) => c.name);
  const get = (q: string) => as(t.agent).get(`/contacts?${q}`);

  it('lists with pagination, newest first by default', async () => {
    const res = await get('');
    expect(names(ok(res, 200))).to.deep.equal(['Dave.*', 'carol', 'Bob', 'Alice 100% Real']);
    expect(res.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 4 });
    const page = await get('limit=2&offset=1');
    expect(names(ok(page, 200))).to.deep.equal(['carol', 'Bob']);
    expect(page.body.pagination).to.deep.equal({ limit: 2, offset: 1, total: 4 });
  });

  it('q is literal: %, _, \\ and regex characters match only themselves; it searches name, email, phone and company', async () => {
    expect(names(ok(await get(`q=${encodeURIComponent('%')}`), 200))).to.deep.equal(['Alice 100% Real']);
    expect(names(ok(await get(`q=${encodeURIComponent('_')}`), 200))).to.deep.equal(['Alice 100% Real']);
    expect(names(ok(await get(`q=${encodeURIComponent('\\')}`), 200))).to.deep.equal(['carol']);
    expect(names(ok(await get(`q=${encodeURIComponent('.*')}`), 200))).to.deep.equal(['Dave.*']);
    expect(ok(await get(`q=${encodeURIComponent('l.c')}`), 200)).to.deep.equal([]);
    expect(names(ok(await get('q=ACME'), 200))).to.deep.equal(['Bob']);
    expect(names(ok(await get('q=carol%40c'), 200))).to.deep.equal(['carol']);
    expect(names(ok(await get(`q=${encodeURIComponent('151 1111')}`), 200))).to.deep.equal(['Bob']);
  });

  it('filters by tag (case-insensitive) and sorts by a fixed allow-list', async () => {
    expect(names(ok(await get('tag=VIP&sort=name'), 200))).to.deep.equal(['Alice 100% Real', 'Dave.*']);
    expect(names(ok(await get('sort=name'), 200))).to.deep.equal(['Alice 100% Real', 'Bob', 'carol', 'Dave.*']);
    expect(names(ok(await get('sort=-name'), 200))).to.deep.equal(['Dave.*', 'carol', 'Bob', 'Alice 100% Real']);
    expect(names(ok(await get('sort=createdAt'), 200))).to.deep.equal(['Alice 100% Real', 'Bob', 'carol', 'Dave.*']);
    expectError(await get('sort=email'), 400, 'validation_failed');
    expectError(await get(`sort=${encodeURIComponent('name; drop table contacts')}`), 400, 'validation_failed');
  });

  const filter = (body: unknown, q = 'sort=name') => as(t.agent).post(`/contacts/filter?${q}`, body);

  it('POST /contacts/filter: standard fields and typed attributes, all or any', async () => {
    expect(names(ok(await filter({ filters: [{ key: 'seats', op: 'gt', value: 5 }] }), 200))).to.deep.equal(['Alice 100% Real', 'carol']);
    expect(names(ok(await filter({ filters: [{ key: 'seats', op: 'lt', value: 5 }] }), 200))).to.deep.equal(['Bob']);
    expect(names(ok(await filter({ filters: [{ key: 'renews', op: 'gt', value: '2026-06-01' }] }), 200))).to.deep.equal(['Alice 100% Real']);
    expect(names(ok(await filter({ filters: [{ key: 'plan', op: 'eq', value: 'free' }] }), 200))).to.deep.equal(['Bob']);
    expect(names(ok(await filter({ filters: [{ key: 'vip', op: 'eq', value: true }] }), 200))).to.deep.equal(['Alice 100% Real']);
    expect(names(ok(await filter({ filters: [{ key: 'seats', op: 'present', value: false }] }), 200))).to.deep.equal(['Dave.*']);
    expect(names(ok(await filter({ filters: [{ key: 'company', op: 'contains', value: '_' }] }), 200))).to.deep.equal(['Alice 100% Real']);
    expect(names(ok(await filter({ filters: [{ key: 'email', op: 'eq', value: 'BOB@B.EXAMPLE' }] }), 200))).to.deep.equal(['Bob']);
    expect(names(ok(await filter({ filters: [{ key: 'phone', op: 'eq', value: '+49 151 1111 2222' }] }), 200))).to.deep.equal(['Bob']);
    expect(names(ok(await filter({ filters: [{ key: 'phone', op: 'present' }] }), 200))).to.deep.equal(['Bob']);
    expect(names(ok(await filter({ filters: [{ key: 'tags', op: 'neq', value: 'trial' }] }), 200))).to.deep.equal(['Alice 100% Real', 'carol']);
    expect(names(ok(await filter({ filters: [{ key: 'company', op: 'neq', value: 'acme' }] }), 200))).to.deep.equal(['Alice 100% Real', 'carol', 'Dave.*']);
    const all = { filters: [{ key: 'tags', op: 'contains', value: 'trial' }, { key: 'seats', op: 'present' }] };
    expect(names(ok(await filter(all), 200))).to.deep.equal(['Bob']);
    const any = await filter({ ...all, match: 'any' }, 'sort=name&limit=2');
    expect(names(ok(any, 200))).to.deep.equal(['Alice 100% Real', 'Bob']);
    expect(any.body.pagination).to.deep.equal({ limit: 2, offset: 0, total: 4 });
    expect(names(ok(await filter({ filters: [{ key: 'createdAt', op: 'lt', value: '2000-01-01' }] }), 200))).to.deep.equal([]);
  });

  it('a filter value is data, never SQL; unknown keys, ops that do not apply and ill-typed values are 400', async () => {
    expect(ok(await filter({ filters: [{ key: 'name', op: 'eq', value: "x' or '1'='1" }] }), 200)).to.deep.equal([]);
    expect(ok(await filter({ filters: [{ key: 'name', op: 'contains', value: '%' }] }), 200).map((c: any) => c.name)).to.deep.equal(['Alice 100% Real']);
    for (const f of [
      { key: 'nope', op: 'eq', value: 'x' },
      { key: "attributes->>'x'", op: 'eq', value: 'x' },
      { key: 'seats', op: 'contains', value: '1' },
      { key: 'seats', op: 'gt', value: 'many' },
      { key: 'name', op: 'gt', value: 'a' },
      { key: 'createdAt', op: 'gt', value: 'yesterday' },
      { key: 'vip', op: 'eq', value: 'true' },
      { key: 'name', op: 'present', value: 'yes' },
    ]) expectError(await filter({ filters: [f] }), 400, 'validation_failed');
    expectError(await filter({ filters: [{ key: 'name', op: 'like', value: 'x' }] }), 400, 'validation_failed');
    expectError(await filter({ filters: [], match: 'some' }), 400, 'validation_failed');
  });
});

describe('Contacts: attribute definitions', () => {
  let t: ContactsTenant;
  before(async () => {
    t = await contactsTenant();
  });

  it('agents read, admins write; keys are unique (409); list needs options; type and key stay fixed', async () => {
    expectError(await as(t.agent).post('/contacts/attribute-definitions', { key: 'tier', label: 'Tier', type: 'text' }), 403, 'forbidden');
    const def = await defineAttribute(t.admin, { key: 'tier', label: 'Tier', type: 'list', options: ['gold', 'silver'] });
    expect(def).to.include({ key: 'tier', label: 'Tier', type: 'list' });
    expect(ok(await as(t.agent).get('/contacts/attribute-definitions'), 200).map((d: any) => d.key)).to.deep.equal(['tier']);
    expect(ok(await as(t.agent).get('/contacts/attribute-definitions/tier'), 200).options).to.deep.equal(['gold', 'silver']);
    expectError(await as(t.admin).post('/contacts/attribute-definitions', { key: 'tier', label: 'Again', type: 'text' }), 409, 'conflict');
    expectError(await as(t.admin).post('/contacts/attribute-definitions', { key: 'empty', label: 'Empty', type: 'list' }), 400, 'validation_failed');
    expectError(await as(t.admin).post('/contacts/attribute-definitions', { key: 'n', label: 'N', type: 'number', options: ['1'] }), 400, 'validation_failed');
    expectError(await as(t.admin).post('/contacts/attribute-definitions', { key: 'Bad Key', label: 'x', type: 'text' }), 400, 'validation_failed');
    expectError(await as(t.admin).post('/contacts/attribute-definitions', { key: 'x', label: 'x', type: 'color' }), 400, 'validation_failed');
    expectError(await as(t.agent).patch('/contacts/attribute-definitions/tier', { label: 'Level' }), 403, 'forbidden');
    const patched = ok(await as(t.admin).patch('/contacts/attribute-definitions/tier', { label: 'Level', options: ['gold', 'silver', 'bronze'] }), 200);
    expect(patched).to.include({ label: 'Level', type: 'list' });
    expectError(await as(t.admin).patch('/contacts/attribute-definitions/tier', { type: 'text' }), 400, 'validation_failed');
    expectError(await as(t.admin).patch('/contacts/attribute-definitions/nope', { label: 'x' }), 404, 'not_found');
  });

  it('deleting a definition removes its values from contacts; the key is then undefined (400)', async () => {
    // Its own definitions: a runner may run this test without the one before it.
    await defineAttribute(t.admin, { key: 'shoe', label: 'Shoe size', type: 'number' });
    await defineAttribute(t.admin, { key: 'finish', label: 'Finish', type: 'text' });
    const c = await createContact(t.agent, { attributes: { shoe: 42, finish: 'bronze' } });
    expectError(await as(t.agent).delete('/contacts/attribute-definitions/shoe'), 403, 'forbidden');
    ok(await as(t.admin).delete('/contacts/attribute-definitions/shoe'), 200);
    expect(ok(await as(t.agent).get(`/contacts/${c.id}`), 200).attributes).to.deep.equal({ finish: 'bronze' });
    expectError(await as(t.agent).patch(`/contacts/${c.id}`, { attributes: { shoe: 41 } }), 400, 'validation_failed');
    expectError(await as(t.admin).delete('/contacts/attribute-definitions/shoe'), 404, 'not_found');
  });
});

describe('Contacts: tags and deletes', () => {
  let t: ContactsTenant;
  before(async () => {
    t = await contactsTenant();
  });

  it('adds a tag (lowercased); adding it again is 200 and changes nothing; removes case-insensitively', async () => {
    const c = await createContact(t.agent, { name: 'Tagged' });
    const first = ok(await as(t.agent).post(`/contacts/${c.id}/tags`, { tag: 'Gold' }), 200);
    expect(first.tags).to.deep.equal(['gold']);
    const again = ok(await as(t.agent).post(`/contacts/${c.id}/tags`, { tag: 'GOLD' }), 200);
    expect(again.tags).to.deep.equal(['gold']);
    expect(again.updatedAt).to.equal(first.updatedAt);
    expect(ok(await as(t.agent).delete(`/contacts/${c.id}/tags/GOLD`), 200).tags).to.deep.equal([]);
    ok(await as(t.agent).delete(`/contacts/${c.id}/tags/gold`), 200);
    const full = await createContact(t.agent, { tags: Array.from({ length: 50 }, (_, i) => `x${i}`) });
    expectError(await as(t.agent).post(`/contacts/${full.id}/tags`, { tag: 'one-more' }), 400, 'validation_failed');
    ok(await as(t.agent).post(`/contacts/${full.id}/tags`, { tag: 'x1' }), 200);
  });

  it('bulk tags are all or nothing: an unknown id or a contact over 50 tags changes none', async () => {
    const a = await createContact(t.agent, { name: 'A' });
    const b = await createContact(t.agent, { name: 'B', tags: ['old'] });
    const full = await createContact(t.agent, { tags: Array.from({ length: 49 }, (_, i) => `y${i}`) });
    expectError(await as(t.agent).post('/contacts/tags', { ids: [a.id, randomUUID()], tags: ['new'] }), 404, 'not_found');
    expectError(await as(t.agent).post('/contacts/tags', { ids: [a.id, full.id], tags: ['p', 'q'] }), 400, 'validation_failed');
    expect(ok(await as(t.agent).get(`/contacts/${a.id}`), 200).tags).to.deep.equal([]);
    expect(ok(await as(t.agent).post('/contacts/tags', { ids: [a.id, b.id], tags: ['New', 'old'] }), 200)).to.deep.equal({ updated: 2 });
    expect(ok(await as(t.agent).get(`/contacts/${b.id}`), 200).tags).to.deep.equal(['old', 'new']);
    expect(ok(await as(t.agent).post('/contacts/tags', { ids: [a.id, b.id], tags: ['new'] }), 200)).to.deep.equal({ updated: 0 });
  });

  it('deletes (admin only); the conversation stays, unlinked', async () => {
    const c = await createContact(t.agent, { email: uniqueEmail('gone') });
    const visitor = await newVisitor(t.owner);
    const { conversationId } = await startConversation(visitor);
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: c.id }), 200);
    expectError(await as(t.agent).delete(`/contacts/${c.id}`), 403, 'forbidden');
    ok(await as(t.admin).delete(`/contacts/${c.id}`), 200);
    expectError(await as(t.agent).get(`/contacts/${c.id}`), 404, 'not_found');
    expectError(await as(t.admin).delete(`/contacts/${c.id}`), 404, 'not_found');
    const conv = ok(await as(t.agent).get(`/conversations/${conversationId}`), 200);
    expect(conv.contactId).to.equal(null);
    ok(await as(t.agent).post(`/conversations/${conversationId}/messages`, { content: 'still works' }), 201);
  });

  it('bulk delete is all or nothing (admin)', async () => {
    const a = await createContact(t.agent, { name: 'BulkA' });
    const b = await createContact(t.agent, { name: 'BulkB' });
    expectError(await as(t.agent).delete('/contacts', { ids: [a.id, b.id] }), 403, 'forbidden');
    expectError(await as(t.admin).delete('/contacts', { ids: [a.id, b.id, randomUUID()] }), 404, 'not_found');
    ok(await as(t.agent).get(`/contacts/${a.id}`), 200);
    expectError(await as(t.admin).delete('/contacts', { ids: [] }), 400, 'validation_failed');
    expect(ok(await as(t.admin).delete('/contacts', { ids: [a.id, b.id, a.id] }), 200)).to.deep.equal({ deleted: 2 });
    expectError(await as(t.agent).get(`/contacts/${b.id}`), 404, 'not_found');
  });
});

describe('Contacts: tenancy', () => {
  it("another organization's contact, note, definition and conflict ids answer 404 on every route", async () => {
    const mine = await contactsTenant();
    const theirs = await contactsTenant();
    const c = await createContact(theirs.agent, { name: 'Theirs', email: uniqueEmail('theirs'), tags: ['t'] });
    const mineContact = await createContact(mine.agent, { name: 'Mine' });
    const note = ok(await as(theirs.agent).post(`/contacts/${c.id}/notes`, { content: 'secret' }), 201);
    await defineAttribute(theirs.admin, { key: 'only_theirs', label: 'x', type: 'text' });
    const { server } = sharedServer();
    const conflict = await server.db.models.ContactConflict.acrossOrgs().insertAndFetch({ organizationId: theirs.owner.orgId, kind: 'field', contactId: c.id, field: 'name', currentValue: 'Theirs', proposedValue: 'X', status: 'open', source: 'ai' });
    const me = as(mine.owner);
    const id = c.id;
    const checks: [Promise<any>, string][] = [
      [me.get(`/contacts/${id}`), 'get'],
      [me.patch(`/contacts/${id}`, { name: 'x' }), 'patch'],
      [me.patch(`/contacts/${id}`, { bogus: 1 }), 'patch with a bad body'],
      [me.delete(`/contacts/${id}`), 'delete'],
      [me.delete('/contacts', { ids: [id] }), 'bulk delete'],
      [me.post(`/contacts/${id}/tags`, { tag: 'x' }), 'add tag'],
      [me.delete(`/contacts/${id}/tags/t`), 'remove tag'],
      [me.post('/contacts/tags', { ids: [id], tags: ['x'] }), 'bulk tag'],
      [me.get(`/contacts/${id}/notes`), 'notes'],
      [me.post(`/contacts/${id}/notes`, { content: 'x' }), 'add note'],
      [me.patch(`/contacts/${id}/notes/${note.id}`, { content: 'x' }), 'edit note'],
      [me.patch(`/contacts/${mineContact.id}/notes/${note.id}`, { content: 'x' }), 'edit note via my contact'],
      [me.delete(`/contacts/${id}/notes/${note.id}`), 'delete note'],
      [me.post(`/contacts/${id}/merge`, { sourceContactId: mineContact.id }), 'merge into theirs'],
      [me.post(`/contacts/${mineContact.id}/merge`, { sourceContactId: id }), 'merge theirs in'],
      [me.get('/contacts/attribute-definitions/only_theirs'), 'definition'],
      [me.patch('/contacts/attribute-definitions/only_theirs', { label: 'x' }), 'edit definition'],
      [me.delete('/contacts/attribute-definitions/only_theirs'), 'delete definition'],
      [me.post(`/contacts/conflicts/${conflict.id}/resolve`, { action: 'apply' }), 'resolve conflict'],
    ];
    for (const [res, what] of checks) {
      const r = await res;
      expect(r.status, `${what}: ${JSON.stringify(r.body)}`).to.equal(404);
      expectError(r, 404, 'not_found');
    }
    // Nothing of theirs shows up in lists or filters, and nothing changed.
    expect(ok(await me.get('/contacts?q=Theirs'), 200)).to.deep.equal([]);
    expect(ok(await me.post('/contacts/filter', { filters: [{ key: 'name', op: 'eq', value: 'Theirs' }] }), 200)).to.deep.equal([]);
    expect(ok(await me.get(`/contacts/conflicts?status=all&contactId=${id}`), 200)).to.deep.equal([]);
    const still = ok(await as(theirs.agent).get(`/contacts/${id}`), 200);
    expect(still).to.include({ name: 'Theirs' });
    expect(still.tags).to.deep.equal(['t']);
    expect(ok(await as(theirs.agent).get(`/contacts/${id}/notes`), 200)).to.have.length(1);
  });
});
