// /templates: listing (category, search, pagination), reading, creating, deleting, the per-organization unique
// shortcut and spec endpoint 1 (PATCH) with its rule 1 order: 401 -> 403 -> 404 -> 400.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { expectError } from './helpers/tenancy.js';
import { Api } from './helpers/http.js';
import { refuseWrites } from './helpers/refusals.js';

function ok(res: { status: number; body: any }, status: number): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.success).to.equal(true);
  return res.body.data;
}

async function create(owner: SignedUp, body: Record<string, unknown>): Promise<any> {
  return ok(await owner.api.post('/templates', body, { token: owner.accessToken }), 201);
}

describe('Templates: list, get, create, delete', () => {
  let owner: SignedUp;
  let agent: Member;
  let other: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
    other = await signUp(server, baseUrl);
    await create(owner, { title: 'Refund policy', content: 'Refunds take 5 days.', shortcut: 'refund', category: 'billing' });
    await create(owner, { title: 'Invoice copy', content: 'Here is your invoice.', shortcut: 'inv', category: 'billing' });
    await create(owner, { title: 'Greeting', content: 'Hi! How can I help?', shortcut: 'hi', category: 'general' });
    await create(owner, { title: 'Password help', content: 'Use the reset link.', shortcut: 'pw-reset' });
    // Another organization's templates never show up here.
    await create(other, { title: 'Refund elsewhere', content: 'Not yours', shortcut: 'refund', category: 'billing' });
  });

  it('lists the organization\'s templates by title for an agent, with pagination', async () => {
    const res = await agent.api.get('/templates', { token: agent.accessToken });
    const data = ok(res, 200);
    expect(data.map((t: any) => t.title)).to.deep.equal(['Greeting', 'Invoice copy', 'Password help', 'Refund policy']);
    expect(res.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 4 });
    const first = data.find((t: any) => t.title === 'Refund policy');
    expect(first).to.include({ content: 'Refunds take 5 days.', shortcut: 'refund', category: 'billing', createdBy: owner.userId });
    expect(first.id).to.match(/^[0-9a-f-]{36}$/);

    const page = await agent.api.get('/templates?limit=2&offset=1', { token: agent.accessToken });
    expect(ok(page, 200).map((t: any) => t.title)).to.deep.equal(['Invoice copy', 'Password help']);
    expect(page.body.pagination).to.deep.equal({ limit: 2, offset: 1, total: 4 });
    const last = await agent.api.get('/templates?limit=2&offset=4', { token: agent.accessToken });
    expect(ok(last, 200)).to.deep.equal([]);
    expect(last.body.pagination.total).to.equal(4);
    expectError(await agent.api.get('/templates?limit=0', { token: agent.accessToken }), 400, 'validation_failed');
    expectError(await agent.api.get('/templates?limit=201', { token: agent.accessToken }), 400, 'validation_failed');
  });

  it('filters by category and searches title and shortcut (case-insensitive, wildcards literal)', async () => {
    const t = { token: agent.accessToken };
    const billing = await agent.api.get('/templates?category=billing', t);
    expect(ok(billing, 200).map((x: any) => x.title)).to.deep.equal(['Invoice copy', 'Refund policy']);
    expect(billing.body.pagination.total).to.equal(2);
    expect(ok(await agent.api.get('/templates?category=nothing', t), 200)).to.deep.equal([]);
    // By title.
    expect(ok(await agent.api.get('/templates?q=GREET', t), 200).map((x: any) => x.title)).to.deep.equal(['Greeting']);
    // By shortcut only ("inv" is not in any other title).
    expect(ok(await agent.api.get('/templates?q=pw-', t), 200).map((x: any) => x.title)).to.deep.equal(['Password help']);
    expect(ok(await agent.api.get(`/templates?q=${encodeURIComponent('inv')}`, t), 200).map((x: any) => x.title)).to.deep.equal(['Invoice copy']);
    // Content is not searched; % is a literal character, not a wildcard.
    expect(ok(await agent.api.get('/templates?q=invoice.', t), 200)).to.deep.equal([]);
    expect(ok(await agent.api.get(`/templates?q=${encodeURIComponent('%')}`, t), 200)).to.deep.equal([]);
    // Both filters at once.
    expect(ok(await agent.api.get('/templates?category=billing&q=refund', t), 200).map((x: any) => x.title)).to.deep.equal(['Refund policy']);
  });

  it('gets one template; a missing one, a malformed id and another organization\'s id are 404', async () => {
    const created = await create(owner, { title: 'Closing', content: 'Anything else?' });
    const got = ok(await agent.api.get(`/templates/${created.id}`, { token: agent.accessToken }), 200);
    expect(got).to.deep.equal(created);
    expect(got).to.include({ shortcut: null, category: null });
    expectError(await agent.api.get(`/templates/${randomUUID()}`, { token: agent.accessToken }), 404, 'not_found');
    expectError(await agent.api.get('/templates/not-a-uuid', { token: agent.accessToken }), 404, 'not_found');
    const theirs = ok(await other.api.get('/templates', { token: other.accessToken }), 200)[0];
    expectError(await agent.api.get(`/templates/${theirs.id}`, { token: agent.accessToken }), 404, 'not_found');
    expectError(await new Api(owner.api.baseUrl).get(`/templates/${created.id}`), 401, 'unauthorized');
    await owner.api.delete(`/templates/${created.id}`, { token: owner.accessToken });
  });

  it('creates as admin (201, trimmed); an agent is 403; a missing title or unknown field is 400', async () => {
    const created = await create(owner, { title: '  Shipping  ', content: 'Ships in 2 days', shortcut: 'ship', category: ' orders ' });
    expect(created).to.include({ title: 'Shipping', content: 'Ships in 2 days', shortcut: 'ship', category: 'orders', createdBy: owner.userId });
    const admin = await addMember(sharedServer().server, owner, 'admin');
    const byAdmin = ok(await admin.api.post('/templates', { title: 'By admin', content: 'x' }, { token: admin.accessToken }), 201);
    expect(byAdmin.createdBy).to.equal(admin.userId);

    const before = ok(await owner.api.get('/templates?limit=200', { token: owner.accessToken }), 200).length;
    expectError(await agent.api.post('/templates', { title: 'Nope', content: 'x' }, { token: agent.accessToken }), 403, 'forbidden');
    expectError(await new Api(owner.api.baseUrl).post('/templates', { title: 'Nope', content: 'x' }), 401, 'unauthorized');
    const t = { token: owner.accessToken };
    const missingTitle = await owner.api.post('/templates', { content: 'x' }, t);
    expectError(missingTitle, 400, 'validation_failed');
    expect(missingTitle.body.error.details.map((d: any) => d.field)).to.include('title');
    expectError(await owner.api.post('/templates', { title: 'x' }, t), 400, 'validation_failed');
    expectError(await owner.api.post('/templates', { title: '   ', content: 'x' }, t), 400, 'validation_failed');
    expectError(await owner.api.post('/templates', { title: 'x', content: 'y', organizationId: other.orgId }, t), 400, 'validation_failed');
    expectError(await owner.api.post('/templates', { title: 'x', content: 'y', shortcut: 'has space' }, t), 400, 'validation_failed');
    expect(ok(await owner.api.get('/templates?limit=200', t), 200).length).to.equal(before);
  });

  it('deletes as admin; afterwards it is 404; an agent cannot delete; another org cannot delete', async () => {
    const created = await create(owner, { title: 'Temporary', content: 'x', shortcut: 'tmp' });
    expectError(await agent.api.delete(`/templates/${created.id}`, { token: agent.accessToken }), 403, 'forbidden');
    expectError(await other.api.delete(`/templates/${created.id}`, { token: other.accessToken }), 404, 'not_found');
    const res = await owner.api.delete(`/templates/${created.id}`, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.success).to.equal(true);
    expectError(await owner.api.get(`/templates/${created.id}`, { token: owner.accessToken }), 404, 'not_found');
    expectError(await owner.api.delete(`/templates/${created.id}`, { token: owner.accessToken }), 404, 'not_found');
    // Its shortcut is free again.
    await create(owner, { title: 'Temporary again', content: 'x', shortcut: 'tmp' });
  });
});

describe('Templates: shortcut unique per organization', () => {
  it('409 on create and on PATCH for a taken shortcut; the same shortcut in another org is fine', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const other = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const a = await create(owner, { title: 'A', content: 'a', shortcut: 'thanks' });
    const b = await create(owner, { title: 'B', content: 'b', shortcut: 'bye' });
    expectError(await owner.api.post('/templates', { title: 'C', content: 'c', shortcut: 'thanks' }, t), 409, 'conflict');
    // Agents type shortcuts in any case, so "Thanks" is the same shortcut.
    expectError(await owner.api.post('/templates', { title: 'C', content: 'c', shortcut: 'THANKS' }, t), 409, 'conflict');
    // A shortcut holds no whitespace, so a padded one cannot sneak past the unique index.
    expectError(await owner.api.post('/templates', { title: 'C', content: 'c', shortcut: ' thanks' }, t), 400, 'validation_failed');
    expectError(await owner.api.patch(`/templates/${b.id}`, { shortcut: 'thanks' }, t), 409, 'conflict');
    expect(ok(await owner.api.get(`/templates/${b.id}`, t), 200).shortcut).to.equal('bye');
    // Re-setting a template's own shortcut is not a conflict; several templates may have none.
    expect(ok(await owner.api.patch(`/templates/${a.id}`, { shortcut: 'thanks', title: 'A2' }, t), 200)).to.include({ shortcut: 'thanks', title: 'A2' });
    await create(owner, { title: 'N1', content: 'n' });
    await create(owner, { title: 'N2', content: 'n' });
    expect(ok(await owner.api.patch(`/templates/${b.id}`, { shortcut: null }, t), 200).shortcut).to.equal(null);
    // Freed shortcut, and another organization using the same one.
    expect(ok(await owner.api.patch(`/templates/${a.id}`, { shortcut: 'bye' }, t), 200).shortcut).to.equal('bye');
    const elsewhere = await create(other, { title: 'Same', content: 's', shortcut: 'bye' });
    expect(elsewhere.shortcut).to.equal('bye');
    await create(other, { title: 'Same 2', content: 's', shortcut: 'thanks' });
  });
});

describe('PATCH /templates/:id (spec endpoint 1, rule 1: 401 -> 403 -> 404 -> 400)', () => {
  let owner: SignedUp;
  let admin: Member;
  let agent: Member;
  let other: SignedUp;
  let template: any;
  let foreign: any;
  let anonymous: Api;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    admin = await addMember(server, owner, 'admin');
    agent = await addMember(server, owner, 'agent');
    other = await signUp(server, baseUrl);
    template = await create(owner, { title: 'Original', content: 'Original content', shortcut: 'orig', category: 'general' });
    foreign = await create(other, { title: 'Theirs', content: 'Their content', shortcut: 'theirs' });
    anonymous = new Api(baseUrl);
  });

  const path = (id: string) => `/templates/${id}`;

  it('401 without a token, whatever the id or the body', async () => {
    expectError(await anonymous.patch(path(template.id), { title: 'x' }), 401, 'unauthorized');
    expectError(await anonymous.patch(path('not-a-uuid'), { title: 'x' }), 401, 'unauthorized');
    expectError(await anonymous.patch(path(randomUUID()), { title: 'x' }), 401, 'unauthorized');
    expectError(await anonymous.patch(path(template.id), { title: 42, bogus: true }), 401, 'unauthorized');
    expectError(await anonymous.patch(path(template.id), {}), 401, 'unauthorized');
    expectError(await anonymous.request('PATCH', path(template.id), { rawBody: '{"title":', headers: { 'content-type': 'application/json' } }), 401, 'unauthorized');
    expectError(await anonymous.patch(path(template.id), { title: 'x' }, { token: 'not.a.jwt' }), 401, 'unauthorized');
  });

  it('403 for an agent, also for a missing template and an invalid body', async () => {
    const t = { token: agent.accessToken };
    expectError(await agent.api.patch(path(template.id), { title: 'By agent' }, t), 403, 'forbidden');
    expectError(await agent.api.patch(path(randomUUID()), { title: 'By agent' }, t), 403, 'forbidden');
    expectError(await agent.api.patch(path(foreign.id), { title: 'By agent' }, t), 403, 'forbidden');
    expectError(await agent.api.patch(path(template.id), { title: '' }, t), 403, 'forbidden');
    expectError(await agent.api.patch(path(randomUUID()), { nope: 1 }, t), 403, 'forbidden');
    expect(ok(await agent.api.get(path(template.id), t), 200).title).to.equal('Original');
  });

  it('404 for an admin and a missing template, also with an invalid body; another organization\'s id is 404', async () => {
    const t = { token: admin.accessToken };
    expectError(await admin.api.patch(path(randomUUID()), { title: 'x' }, t), 404, 'not_found');
    expectError(await admin.api.patch(path(randomUUID()), { title: '' }, t), 404, 'not_found');
    expectError(await admin.api.patch(path(randomUUID()), { title: 7, unknown: 'x' }, t), 404, 'not_found');
    expectError(await admin.api.patch(path(randomUUID()), {}, t), 404, 'not_found');
    expectError(await admin.api.patch(path('not-a-uuid'), { title: 'x' }, t), 404, 'not_found');
    expectError(await admin.api.patch(path(foreign.id), { title: 'Hijacked' }, t), 404, 'not_found');
    expectError(await admin.api.patch(path(foreign.id), { title: '' }, t), 404, 'not_found');
    expect(ok(await other.api.get(path(foreign.id), { token: other.accessToken }), 200).title).to.equal('Theirs');
  });

  it('400 validation_failed for an admin with invalid input; nothing changes', async () => {
    const t = { token: admin.accessToken };
    const invalid: [string, unknown][] = [
      ['title of the wrong type', { title: 123 }],
      ['content of the wrong type', { content: ['a'] }],
      ['shortcut of the wrong type', { shortcut: 5 }],
      ['category of the wrong type', { category: { a: 1 } }],
      ['empty title', { title: '' }],
      ['empty content', { content: '' }],
      ['whitespace-only title', { title: '   \t ' }],
      ['whitespace-only content', { content: '\n  ' }],
      ['null title', { title: null }],
      ['unknown field', { title: 'Fine', colour: 'red' }],
      ['organizationId', { organizationId: other.orgId }],
      ['empty body', {}],
      ['an array body', [{ title: 'x' }]],
    ];
    for (const [what, body] of invalid) {
      const res = await admin.api.patch(path(template.id), body, t);
      expect(res.status, `${what}: ${JSON.stringify(res.body)}`).to.equal(400);
      expectError(res, 400, 'validation_failed');
    }
    const unknown = await admin.api.patch(path(template.id), { colour: 'red' }, t);
    expect(unknown.body.error.details).to.deep.include({ field: 'colour', message: 'is not an allowed field', in: 'body' });
    expectError(await admin.api.request('PATCH', path(template.id), { rawBody: '{"title":', headers: { 'content-type': 'application/json' }, token: admin.accessToken }), 400, 'invalid_json');
    const unchanged = ok(await admin.api.get(path(template.id), t), 200);
    expect(unchanged).to.deep.equal(template);
  });

  it('200 for an admin (and the owner) with valid input; the change is persisted, untouched fields stay', async () => {
    const t = { token: admin.accessToken };
    const res = await admin.api.patch(path(template.id), { title: '  Updated title ', content: 'New content' }, t);
    const updated = ok(res, 200);
    expect(res.body.message).to.be.a('string').and.not.equal('');
    expect(updated).to.include({ id: template.id, title: 'Updated title', content: 'New content', shortcut: 'orig', category: 'general', createdBy: owner.userId });
    expect(new Date(updated.updatedAt).getTime()).to.be.at.least(new Date(template.updatedAt).getTime());
    expect(ok(await agent.api.get(path(template.id), { token: agent.accessToken }), 200)).to.deep.equal(updated);

    const byOwner = ok(await owner.api.patch(path(template.id), { category: null, shortcut: 'updated' }, { token: owner.accessToken }), 200);
    expect(byOwner).to.include({ title: 'Updated title', content: 'New content', shortcut: 'updated', category: null });
    const listed = ok(await agent.api.get('/templates?q=updated', { token: agent.accessToken }), 200);
    expect(listed.map((x: any) => x.id)).to.deep.equal([template.id]);
    expect(ok(await agent.api.get('/templates?category=general', { token: agent.accessToken }), 200)).to.deep.equal([]);
  });

  it('an admin demoted to agent is 403 at once (the role is reloaded, not taken from the token)', async () => {
    const demoted = admin;
    expect(ok(await demoted.api.patch(path(template.id), { category: 'mine' }, { token: demoted.accessToken }), 200).category).to.equal('mine');
    ok(await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${demoted.membershipId}/role`, { role: 'agent' }, { token: owner.accessToken }), 200);
    expectError(await demoted.api.patch(path(template.id), { category: 'again' }, { token: demoted.accessToken }), 403, 'forbidden');
    expectError(await demoted.api.patch(path(randomUUID()), { category: 'again' }, { token: demoted.accessToken }), 403, 'forbidden');
  });
});

describe('Templates: what a conflict, a failure and a missing template answer', () => {
  it("a taken shortcut is 409 with the shortcut's words; a database failure of the write is not a conflict", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const taken = await create(owner, { title: 'Taken', content: 'x', shortcut: 'taken' });
    const other = await create(owner, { title: 'Other', content: 'y' });
    for (const res of [await owner.api.post('/templates', { title: 'Again', content: 'x', shortcut: 'taken' }, t), await owner.api.patch(`/templates/${other.id}`, { shortcut: 'taken' }, t)]) {
      expectError(res, 409, 'conflict');
      expect(res.body.message).to.equal('Another template already uses this shortcut');
    }
    const refusal = await refuseWrites(server.db.knex, { table: 'templates', on: 'update', when: `new.organization_id = '${owner.orgId}'`, message: 'template writes are refused' });
    try {
      expectError(await owner.api.patch(`/templates/${taken.id}`, { shortcut: 'fresh' }, t), 500, 'internal_error');
    } finally {
      await refusal.lift();
    }
    expect(ok(await owner.api.get(`/templates/${taken.id}`, t), 200).shortcut).to.equal('taken');
  });

  it("a missing template is 'Template not found', also when it goes between the check and the delete", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const res = await owner.api.get(`/templates/${randomUUID()}`, { token: owner.accessToken });
    expectError(res, 404, 'not_found');
    expect(res.body.message).to.equal('Template not found');
    // Two admins deleting one template: the route found it, the other delete came first.
    const gone = await create(owner, { title: 'Gone', content: 'x' });
    await server.services.templates.remove(owner.orgId, gone.id);
    const second = await server.services.templates.remove(owner.orgId, gone.id).then(() => null, (err: { code?: string; message?: string }) => err);
    expect(second).to.include({ code: 'not_found', message: 'Template not found' });
  });

  it('trims a changed category; a blank one is no category', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const template = await create(owner, { title: 'Sorted', content: 'x', category: '   ' });
    expect(template.category).to.equal(null);
    expect(ok(await owner.api.patch(`/templates/${template.id}`, { category: '  sales  ' }, t), 200).category).to.equal('sales');
    expect(ok(await owner.api.get('/templates?category=sales', t), 200).map((x: any) => x.id)).to.deep.equal([template.id]);
    expect(ok(await owner.api.patch(`/templates/${template.id}`, { category: ' ' }, t), 200).category).to.equal(null);
  });
});
