// The contact a conversation is linked to by its fields (find-or-create: by email, else a phone with no other email
// on record, else a new contact; only empty fields are filled, a phone someone else holds is left out), the AI
// service's seek (email before phone before name; of several with one name, the most recently active), and what a
// changed email does to its verification.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent } from './helpers/sockets.js';
import { randomUUID } from 'node:crypto';
import { as, contactsTenant, createContact, ok, type ContactsTenant } from './helpers/contacts.js';

let phoneSeq = 0;
/** A phone number of its own per call (German mobile numbers: +49 151 then 8 digits). */
const uniquePhone = () => `+49151${String(Date.now() % 1e6).padStart(6, '0')}${String(phoneSeq++ % 100).padStart(2, '0')}`;

describe('Contacts: a conversation linked by its fields', () => {
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  before(async () => {
    t = await contactsTenant();
  });

  const link = async (body: Record<string, unknown>) => {
    const { conversationId } = await startConversation(await newVisitor(t.owner));
    return ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, body), 200);
  };
  const contact = async (id: string) => ok(await as(t.agent).get(`/contacts/${id}`), 200);
  const countContacts = async () => Number((await knex()('contacts').where({ organization_id: t.owner.orgId }).count({ n: '*' }))[0]!.n);

  it('by email: fills only the empty fields, never overwrites a recorded name', async () => {
    const email = uniqueEmail('fill');
    const c = await createContact(t.agent, { email, name: 'Recorded Name' });
    const linked = await link({ email, name: 'Other Name', company: 'FillCo' });
    expect(linked.contactId).to.equal(c.id);
    expect(await contact(c.id)).to.include({ name: 'Recorded Name', company: 'FillCo', email });
    const named = await createContact(t.agent, { email: uniqueEmail('fill2'), company: 'Kept Co' });
    await link({ email: named.email, name: 'Now Named', company: 'Other Co' });
    expect(await contact(named.id)).to.include({ name: 'Now Named', company: 'Kept Co' });
  });

  it('by email: a phone another contact holds is left out rather than failing the link', async () => {
    const phone = uniquePhone();
    const holder = await createContact(t.agent, { name: 'Holder', phone });
    const c = await createContact(t.agent, { email: uniqueEmail('nophone') });
    const linked = await link({ email: c.email, phone });
    expect(linked.contactId).to.equal(c.id);
    expect((await contact(c.id)).phone).to.equal(null);
    expect((await contact(holder.id)).phone).to.equal(phone);
  });

  it('by phone: the holder without an email is the same person and gains the email and the empty name', async () => {
    const phone = uniquePhone();
    const c = await createContact(t.agent, { phone, company: 'PhoneCo' });
    const email = uniqueEmail('byphone');
    const linked = await link({ phone: phone.replace('+49151', '+49 151 '), email, name: 'Phone Person', company: 'Other' });
    expect(linked.contactId).to.equal(c.id);
    expect(await contact(c.id)).to.include({ email, name: 'Phone Person', company: 'PhoneCo', phone });
    // A phone alone finds its holder even when that one has an email.
    const again = await link({ phone });
    expect(again.contactId).to.equal(c.id);
  });

  it('a new email with a phone held under another email is a new contact, without the phone', async () => {
    const phone = uniquePhone();
    const holder = await createContact(t.agent, { phone, email: uniqueEmail('holder') });
    const before = await countContacts();
    const email = uniqueEmail('newcomer');
    const linked = await link({ email, phone, name: 'Newcomer' });
    expect(linked.contactId).to.not.equal(holder.id);
    expect(await countContacts()).to.equal(before + 1);
    expect(await contact(linked.contactId)).to.include({ email, phone: null, name: 'Newcomer' });
    expect(await contact(holder.id)).to.include({ phone, email: holder.email });
  });

  it('nothing known: a new contact with the fields given (normalized), a phone no one holds included', async () => {
    const email = uniqueEmail('fresh');
    const phone = uniquePhone();
    const linked = await link({ email: email.toUpperCase(), phone, name: '  Fresh  ', company: 'FreshCo' });
    expect(await contact(linked.contactId)).to.include({ email, phone, name: 'Fresh', company: 'FreshCo' });
  });

  it('a ticket naming a new requester makes a contact with the requester\'s name and email', async () => {
    const email = uniqueEmail('new-requester');
    const ticket = ok(await as(t.agent).post('/tickets', { title: 'New person', requester: { email, name: 'New Requester' } }), 201);
    expect(await contact(ticket.contactId)).to.include({ email, name: 'New Requester' });
  });

  it('a ticket naming a known requester with nothing to fill leaves the contact untouched (updatedAt kept)', async () => {
    const email = uniqueEmail('requester');
    const c = await createContact(t.agent, { email, name: 'Known Requester', phone: uniquePhone(), company: 'ReqCo' });
    const ticket = ok(await as(t.agent).post('/tickets', { title: 'Same person', requester: { email: email.toUpperCase(), name: 'Another Name' } }), 201);
    expect(ticket.contactId).to.equal(c.id);
    expect(await contact(c.id)).to.include({ updatedAt: c.updatedAt, name: 'Known Requester' });
  });
});

describe('Contacts: seek by the AI service', () => {
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  const seek = async (query: string) => ok(await new Api(sharedServer().baseUrl).get(`/contacts/ai/seek?organizationId=${t.owner.orgId}&${query}`, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 200);
  before(async () => {
    t = await contactsTenant();
  });

  it('email is tried before phone, and phone before name', async () => {
    const byEmail = await createContact(t.agent, { name: 'Seek Order', email: uniqueEmail('order') });
    const byPhone = await createContact(t.agent, { name: 'Seek Order Phone', phone: uniquePhone() });
    const q = (o: Record<string, string>) => new URLSearchParams(o).toString();
    expect((await seek(q({ email: byEmail.email, phone: byPhone.phone, name: 'Seek Order Phone' }))).contact.id).to.equal(byEmail.id);
    expect((await seek(q({ phone: byPhone.phone, name: 'Seek Order' }))).contact.id).to.equal(byPhone.id);
    // An unknown email is not found, whatever phone comes with it.
    expect((await seek(q({ email: uniqueEmail('none'), phone: byPhone.phone }))).found).to.equal(false);
    expect((await seek(q({ name: '  seek ORDER ' }))).contact.id).to.equal(byEmail.id);
    const blank = await new Api(sharedServer().baseUrl).get(`/contacts/ai/seek?organizationId=${t.owner.orgId}&name=%20%20`, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } });
    expectError(blank, 400, 'validation_failed');
    expect(blank.body.error.details).to.deep.equal([{ field: 'query', message: 'one of email, phone, name is required' }]);
  });

  it('of several contacts with one name, the most recently active; with its identities', async () => {
    const name = `Twin ${Date.now()}`;
    const [a, b, c] = [await createContact(t.agent, { name }), await createContact(t.agent, { name, identities: [{ channel: 'telegram', externalId: `tw-${Date.now()}` }] }), await createContact(t.agent, { name })];
    await knex()('contacts').where({ id: a.id }).update({ last_activity_at: new Date('2026-01-01T00:00:00Z') });
    await knex()('contacts').where({ id: b.id }).update({ last_activity_at: new Date('2026-03-01T00:00:00Z') });
    await knex()('contacts').where({ id: c.id }).update({ last_activity_at: new Date('2026-02-01T00:00:00Z') });
    const found = (await seek(`name=${encodeURIComponent(name)}`)).contact;
    expect(found.id).to.equal(b.id);
    expect(found.identities).to.have.length(1);
  });
});

describe('Contacts: a changed email is no longer verified', () => {
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  before(async () => {
    t = await contactsTenant();
  });

  it('a new email clears the verification; the same email (any case) or another field keeps it', async () => {
    const verified = new Date('2026-01-02T03:04:05.000Z');
    const c = await createContact(t.agent, { name: 'Verified', email: uniqueEmail('verified') });
    await knex()('contacts').where({ id: c.id }).update({ email_verified_at: verified });
    const same = ok(await as(t.agent).patch(`/contacts/${c.id}`, { email: c.email.toUpperCase(), name: 'Still Verified' }), 200);
    expect(same).to.include({ email: c.email, emailVerifiedAt: verified.toISOString(), name: 'Still Verified' });
    const changed = ok(await as(t.agent).patch(`/contacts/${c.id}`, { email: uniqueEmail('changed') }), 200);
    expect(changed.emailVerifiedAt).to.equal(null);
  });
});

describe('Contacts: what a contact shows of its history, and unknown ids', () => {
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  before(async () => {
    t = await contactsTenant();
  });

  it('mergedFrom lists the latest merge first', async () => {
    const [a, b, c] = [await createContact(t.agent, { name: 'First In' }), await createContact(t.agent, { name: 'Second In' }), await createContact(t.agent, { name: 'Keeper' })];
    ok(await as(t.agent).post(`/contacts/${c.id}/merge`, { sourceContactId: a.id }), 200);
    await knex()('contact_merges').where({ source_contact_id: a.id }).update({ created_at: new Date('2026-01-01T00:00:00Z') });
    const survivor = ok(await as(t.agent).post(`/contacts/${c.id}/merge`, { sourceContactId: b.id }), 200);
    expect(survivor.mergedFrom.map((m: any) => m.contactId)).to.deep.equal([b.id, a.id]);
    expect(ok(await as(t.agent).get(`/contacts/${c.id}`), 200).mergedFrom.map((m: any) => m.contactId)).to.deep.equal([b.id, a.id]);
  });

  it('identities are listed oldest first; an external id is stored trimmed', async () => {
    const c = await createContact(t.agent, { name: 'Two Ways', identities: [{ channel: 'telegram', externalId: `  tg-${randomUUID()}  ` }, { channel: 'whatsapp', externalId: `wa-${randomUUID()}` }] });
    expect(c.identities[0].externalId).to.match(/^tg-[0-9a-f-]+$/);
    // The later-written row made the older one: the order follows the time, not the table.
    await knex()('contact_identities').where({ contact_id: c.id, channel: 'whatsapp' }).update({ created_at: new Date('2026-01-01T00:00:00Z') });
    expect(ok(await as(t.agent).get(`/contacts/${c.id}`), 200).identities.map((i: any) => i.channel)).to.deep.equal(['whatsapp', 'telegram']);
  });

  it('linking a conversation to an id that is no contact (and was none) is 404', async () => {
    const { conversationId } = await startConversation(await newVisitor(t.owner));
    const res = await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: randomUUID() });
    expectError(res, 404, 'not_found');
    expect(res.body.message).to.equal('Contact not found');
    expect(ok(await as(t.agent).get(`/conversations/${conversationId}`), 200).contactId).to.equal(null);
  });
});

describe('Contacts: agents hear tag changes and contacts made by a link', () => {
  const track = closeAfterEach();

  it('contact_updated for an added tag, a removed tag and bulk tags; contact_created for a contact a link made', async () => {
    const t = await contactsTenant();
    const socket = track(await connectOk(sharedServer().baseUrl, t.owner.orgId, t.agent.accessToken));
    const c = await createContact(t.agent, { name: 'Tag Heard' });
    const added = nextEvent(socket, 'contact_updated', (p) => p.contact.id === c.id && p.contact.tags.includes('vip'));
    ok(await as(t.agent).post(`/contacts/${c.id}/tags`, { tag: 'VIP' }), 200);
    expect((await added).contact.tags).to.deep.equal(['vip']);
    const removed = nextEvent(socket, 'contact_updated', (p) => p.contact.id === c.id && p.contact.tags.length === 0);
    ok(await as(t.agent).delete(`/contacts/${c.id}/tags/vip`), 200);
    await removed;
    const bulk = nextEvent(socket, 'contact_updated', (p) => p.contact.id === c.id && p.contact.tags.includes('bulk'));
    ok(await as(t.agent).post('/contacts/tags', { ids: [c.id], tags: ['bulk'] }), 200);
    await bulk;

    const email = uniqueEmail('made-by-link');
    const created = nextEvent(socket, 'contact_created', (p) => p.contact.email === email);
    const { conversationId } = await startConversation(await newVisitor(t.owner));
    const linked = ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { email, name: 'Made By Link' }), 200);
    expect((await created).contact).to.include({ id: linked.contactId, email });
    expect((await created).contact.identities).to.deep.equal([]);
    expect(linked.contact).to.include({ id: linked.contactId, email });

    // Linking known contacts (by email, by phone) announces no contact_created: the next one heard is a new contact's.
    const phone = uniquePhone();
    const known = nextEvent(socket, 'contact_created', (p) => p.contact.name === 'Known By Phone');
    await createContact(t.agent, { phone, name: 'Known By Phone' });
    await known;
    const heard = collect(socket, 'contact_created');
    await startConversation(await newVisitor(t.owner)).then(({ conversationId: id }) => as(t.agent).post(`/conversations/${id}/contact`, { email }));
    await startConversation(await newVisitor(t.owner)).then(({ conversationId: id }) => as(t.agent).post(`/conversations/${id}/contact`, { phone }));
    const last = nextEvent(socket, 'contact_created', (p) => p.contact.name === 'Barrier');
    await createContact(t.agent, { name: 'Barrier' });
    await last;
    expect(heard.map((p) => p.contact.name)).to.deep.equal(['Barrier']);
  });
});

describe('Contacts: webhooks for creations, changes and merges', function () {
  this.timeout(60_000);
  let server: TestServer;
  let owner: SignedUp;
  before(async () => {
    // Private http targets are allowed on this server; nothing listens at the address, and nothing waits for a call.
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true' });
    owner = await signUp(server.server, server.baseUrl);
  });
  after(async () => {
    await server?.stop();
  });

  it('contact.created, contact.updated and contact.merged are recorded with the change: the contact, the survivor and the source id', async () => {
    const hook = ok(await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/contacts', events: ['contact.created', 'contact.updated', 'contact.merged'] }, { token: owner.accessToken }), 201).webhook;
    const target = await createContact(owner, { name: 'Hooked' });
    const source = await createContact(owner, { name: 'Hooked Source' });
    ok(await as(owner).patch(`/contacts/${target.id}`, { company: 'HookCo' }), 200);
    ok(await as(owner).post(`/contacts/${target.id}/merge`, { sourceContactId: source.id }), 200);
    const rows = await server.server.db.knex('webhook_deliveries').where({ webhook_id: hook.id }).orderBy('created_at').select('event_type', 'payload');
    expect(rows.map((r) => r.event_type ?? r.eventType)).to.deep.equal(['contact.created', 'contact.created', 'contact.updated', 'contact.merged']);
    const [created, , updated, merged] = rows.map((r) => r.payload);
    expect(created.contact).to.include({ id: target.id, name: 'Hooked' });
    expect(updated.contact).to.include({ id: target.id, company: 'HookCo' });
    expect(merged.contact).to.include({ id: target.id, company: 'HookCo' });
    expect(merged.sourceContactId).to.equal(source.id);
  });

  it('records them however the contact came or changed: a ticket\'s new requester, the AI\'s upserts, an applied conflict', async () => {
    const other = await signUp(server.server, server.baseUrl);
    const hook = ok(await other.api.post('/webhooks', { url: 'http://127.0.0.1:9/contacts', events: ['contact.created', 'contact.updated'] }, { token: other.accessToken }), 201).webhook;
    const recorded = async () => (await server.server.db.knex('webhook_deliveries').where({ webhook_id: hook.id }).orderBy('created_at').select('event_type', 'payload')).map((r) => [r.event_type ?? r.eventType, r.payload.contact.id, r.payload.contact.company, r.payload.contact.phone]);
    const email = uniqueEmail('requester');
    const ticket = ok(await other.api.post('/tickets', { title: 'Where is my parcel', requester: { name: 'Rhea', email } }, { token: other.accessToken }), 201);
    const ai = new Api(server.baseUrl);
    const headers = { 'x-ai-tool-secret': TEST_AI_SECRET };
    const fresh = ok(await ai.post('/contacts/ai/upsert', { organizationId: other.orgId, name: 'Ada New', email: uniqueEmail('ada'), company: 'FirstCo' }, { headers }), 201);
    expect(fresh.created).to.equal(true);
    // Only its last activity changes: no event (a channel's every message from a known sender would make one).
    ok(await ai.post('/contacts/ai/upsert', { organizationId: other.orgId, email: fresh.contact.email }, { headers }), 200);
    // A phone filled in, a company proposed (a conflict), the conflict applied.
    const changed = ok(await ai.post('/contacts/ai/upsert', { organizationId: other.orgId, email: fresh.contact.email, phone: '+1 415 555 0199', company: 'SecondCo', name: 'Ada Other' }, { headers }), 200);
    const byField = Object.fromEntries(changed.conflicts.map((c: any) => [c.field, c.id]));
    expect(Object.keys(byField).sort()).to.deep.equal(['company', 'name']);
    // A dismissed conflict changes nothing: no event.
    ok(await as(other).post(`/contacts/conflicts/${byField.name}/resolve`, { action: 'dismiss' }), 200);
    ok(await as(other).post(`/contacts/conflicts/${byField.company}/resolve`, { action: 'apply' }), 200);
    expect(await recorded()).to.deep.equal([
      ['contact.created', ticket.contactId, null, null],
      ['contact.created', fresh.contact.id, 'FirstCo', null],
      ['contact.updated', fresh.contact.id, 'FirstCo', '+14155550199'],
      ['contact.updated', fresh.contact.id, 'SecondCo', '+14155550199'],
    ]);
  });
});

describe('Contacts: a merge moves the source\'s tickets, only those, every time', () => {
  it('each of two merges moves its source\'s ticket; a ticket of another contact stays', async () => {
    const t = await contactsTenant();
    const { knex } = sharedServer().server.db;
    const ticket = async (contactId: string) => (await as(t.agent).post('/tickets', { title: 'Merge me', contactId })).body.data.id as string;
    const contactOf = async (id: string) => {
      const row = await knex('tickets').where({ id }).first('contact_id');
      return (row.contactId ?? row.contact_id) as string | null;
    };
    const [keeper, first, second, bystander] = [await createContact(t.agent, { name: 'Keeper' }), await createContact(t.agent, { name: 'First' }), await createContact(t.agent, { name: 'Second' }), await createContact(t.agent, { name: 'Bystander' })];
    const [t1, t2, t3] = [await ticket(first.id), await ticket(second.id), await ticket(bystander.id)];
    ok(await as(t.agent).post(`/contacts/${keeper.id}/merge`, { sourceContactId: first.id }), 200);
    ok(await as(t.agent).post(`/contacts/${keeper.id}/merge`, { sourceContactId: second.id }), 200);
    expect([await contactOf(t1), await contactOf(t2), await contactOf(t3)]).to.deep.equal([keeper.id, keeper.id, bystander.id]);
  });
});

// Two creates of one email (or phone) at once: the first to commit wins, the other finds it. The race is made
// deterministic by holding the winner's row uncommitted in a transaction of the test's own until the request's insert
// waits on the unique index. PostgreSQL only: the embedded database serves one connection, so its transactions
// never overlap and there is no race to lose.
describe('Contacts: the loser of two concurrent creates', function () {
  this.timeout(30_000);
  const track = closeAfterEach();
  let t: ContactsTenant;
  const knex = () => sharedServer().server.db.knex;
  before(async function () {
    if (!process.env.DATABASE_URL) this.skip();
    t = await contactsTenant();
  });

  /** Runs `request` while a contact with `row`'s fields is inserted but not committed, commits it once the request waits on it. */
  const racing = async <T>(row: Record<string, unknown>, request: () => Promise<T>): Promise<{ winnerId: string; result: T }> => {
    const trx = await knex().transaction();
    try {
      const winnerId = randomUUID();
      await trx('contacts').insert({ id: winnerId, organization_id: t.owner.orgId, ...row });
      const pending = request();
      // The request has read no contact and now waits for ours to commit or roll back.
      for (let i = 0; ; i++) {
        const waiting = await knex().raw(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike 'insert into "contacts"%'`);
        if (waiting.rows[0].n > 0) break;
        if (i > 500) throw new Error('the request never reached its insert');
        await new Promise((r) => setTimeout(r, 20));
      }
      await trx.commit();
      return { winnerId, result: await pending };
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
    }
  };
  const linkNew = async (body: Record<string, unknown>) => {
    const { conversationId } = await startConversation(await newVisitor(t.owner));
    return { conversationId, res: await as(t.agent).post(`/conversations/${conversationId}/contact`, body) };
  };

  it('by email: the link finds the winner and fills only its empty fields; one contact with the email, not announced by the loser', async () => {
    const socket = track(await connectOk(sharedServer().baseUrl, t.owner.orgId, t.agent.accessToken));
    const heard = collect(socket, 'contact_created');
    const email = uniqueEmail('race');
    const { winnerId, result } = await racing({ email, name: 'Winner' }, () => linkNew({ email: email.toUpperCase(), name: 'Loser', company: 'LoserCo' }));
    const linked = ok(result.res, 200);
    expect(linked.contactId).to.equal(winnerId);
    expect(ok(await as(t.agent).get(`/contacts/${winnerId}`), 200)).to.include({ email, name: 'Winner', company: 'LoserCo' });
    expect(ok(await as(t.agent).get(`/conversations/${result.conversationId}`), 200).contactId).to.equal(winnerId);
    const rows = await knex()('contacts').where({ organization_id: t.owner.orgId }).whereRaw('lower(email) = ?', [email]);
    expect(rows).to.have.length(1);
    // The winner was written by the test, so nothing announces it; the loser found it and must not either.
    const barrier = nextEvent(socket, 'contact_created', (p) => p.contact.name === 'Race Barrier');
    await createContact(t.agent, { name: 'Race Barrier' });
    await barrier;
    expect(heard.map((p) => p.contact.name)).to.deep.equal(['Race Barrier']);
  });

  it('by email, with nothing to fill: the winner is linked unchanged', async () => {
    const email = uniqueEmail('race-same');
    const { winnerId, result } = await racing({ email, name: 'Winner', company: 'WinCo' }, () => linkNew({ email, name: 'Loser' }));
    expect(ok(result.res, 200).contactId).to.equal(winnerId);
    expect(ok(await as(t.agent).get(`/contacts/${winnerId}`), 200)).to.include({ name: 'Winner', company: 'WinCo' });
  });

  it('by phone alone: the loser is told another contact has the phone (409), and the conversation stays unlinked', async () => {
    const phone = uniquePhone();
    const { result } = await racing({ phone, name: 'Phone Winner' }, () => linkNew({ phone, name: 'Phone Loser' }));
    expectError(result.res, 409, 'conflict');
    expect(result.res.body.message).to.equal('Another contact already has this phone number');
    expect(ok(await as(t.agent).get(`/conversations/${result.conversationId}`), 200).contactId).to.equal(null);
  });

  it('a new email whose phone a concurrent create takes: 409, the email is no one\'s', async () => {
    const phone = uniquePhone();
    const email = uniqueEmail('race-phone');
    const { result } = await racing({ phone, name: 'Phone Winner' }, () => linkNew({ email, phone }));
    expectError(result.res, 409, 'conflict');
    expect(await knex()('contacts').where({ organization_id: t.owner.orgId }).whereRaw('lower(email) = ?', [email])).to.have.length(0);
  });
});
