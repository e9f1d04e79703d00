// Organizations: the slug a name gives, the order organizations are listed in, the last organization a login lands
// in, what a change trims or clears, and the operators' plan changes (`npm run org -- plan` calls these in-process).
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';
import { invite } from './helpers/tenancy.js';

/** A word no other run has used: slugs are unique across every organization of the database. */
const word = () => randomBytes(5).toString('hex');

describe('organizations: slugs, order, landing, plans', () => {
  it('a slug is the name without accents, lowercased, with one dash between words and none at the ends', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const w = word();
    const created = expectApiSuccess(await owner.api.post('/organizations', { name: `  Café Crème — Support ${w}!! ` }, { token: owner.accessToken }), 201);
    expect(created.slug).to.equal(`cafe-creme-support-${w}`);
    expect(created.name).to.equal(`Café Crème — Support ${w}!!`);

    const symbols = expectApiSuccess(await owner.api.post('/organizations', { name: '*** !!! ***' }, { token: owner.accessToken }), 201);
    expect(symbols.slug).to.match(/^org(-[0-9a-f]{8})?$/);
  });

  it('a long name gives 60 characters; when taken, 52 of them and 8 random hex digits', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const name = `${word()} ${'very long name '.repeat(6)}`;
    const base = name.trim().replace(/ +/g, '-').slice(0, 60);
    const first = expectApiSuccess(await owner.api.post('/organizations', { name }, { token: owner.accessToken }), 201);
    expect(first.slug).to.equal(base);
    const second = expectApiSuccess(await owner.api.post('/organizations', { name }, { token: owner.accessToken }), 201);
    expect(second.slug).to.match(new RegExp(`^${base.slice(0, 52)}-[0-9a-f]{8}$`));
  });

  it('lists organizations by when the membership began, oldest first, and a login lands in the last one switched to', async () => {
    const { server, baseUrl } = sharedServer();
    const user = await signUp(server, baseUrl, { organizationName: 'Order First' });
    const second = expectApiSuccess(await user.api.post('/organizations', { name: 'Order Second' }, { token: user.accessToken }), 201);
    // Joined later, though created earlier: listed by the membership, not by the organization.
    const older = await signUp(server, baseUrl, { organizationName: 'Order Older' });
    const inv = await invite(server, older, 'agent', { email: user.email });
    const third = expectApiSuccess(await user.api.post('/organizations', { name: 'Order Third' }, { token: user.accessToken }), 201);
    expectApiSuccess(await user.api.post('/memberships/accept-invite', { token: inv.token }, { token: user.accessToken }), 200);

    const list = expectApiSuccess(await user.api.get('/organizations', { token: user.accessToken }), 200);
    expect(list.map((o: { id: string }) => o.id)).to.deep.equal([user.orgId, second.id, third.id, older.orgId]);

    // Two memberships that began in the same instant: the older organization first.
    await server.db.knex('memberships').where({ user_id: user.userId, organization_id: third.id }).update({
      activated_at: server.db.knex('memberships').select('activated_at').where({ user_id: user.userId, organization_id: second.id }),
    });
    const tied = expectApiSuccess(await user.api.get('/organizations', { token: user.accessToken }), 200);
    expect(tied.map((o: { id: string }) => o.id)).to.deep.equal([user.orgId, second.id, third.id, older.orgId]);

    expectApiSuccess(await user.api.post(`/organizations/${third.id}/switch`, undefined, { token: user.accessToken }), 200);
    const login = expectApiSuccess(await user.api.post('/auth/login', { email: user.email, password: user.password }), 200);
    expect(login.organization.id).to.equal(third.id);
  });

  it('a change trims the name and clears the domain; a new organization without a domain has none', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const created = expectApiSuccess(await owner.api.post('/organizations', { name: 'No Domain Co' }, { token: owner.accessToken }), 201);
    expect(created.domain).to.equal(null);
    const path = `/organizations/${owner.orgId}`;
    expectApiSuccess(await owner.api.patch(path, { domain: 'kept.example.test' }, { token: owner.accessToken }), 200);
    const renamed = expectApiSuccess(await owner.api.patch(path, { name: '  Trimmed Name  ' }, { token: owner.accessToken }), 200);
    expect(renamed).to.include({ name: 'Trimmed Name', domain: 'kept.example.test' });
    const cleared = expectApiSuccess(await owner.api.patch(path, { domain: null }, { token: owner.accessToken }), 200);
    expect(cleared).to.include({ name: 'Trimmed Name', domain: null });

    const badZone = await owner.api.patch(path, { settings: { timezone: 'Mars/Olympus_Mons' } }, { token: owner.accessToken });
    expectApiError(badZone, 400, 'validation_failed');
    expect(badZone.body.message).to.equal('settings.timezone is not an IANA time zone');
    expect(badZone.body.error.details).to.deep.equal([{ field: 'settings.timezone', message: 'is not an IANA time zone (e.g. Europe/Paris, UTC)', in: 'body' }]);
  });

  it("an owner's organizations by email: accepted ownerships only, oldest first, the email in any case and spacing", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const second = expectApiSuccess(await owner.api.post('/organizations', { name: 'Owned Second' }, { token: owner.accessToken }), 201);
    // An organization where the same person is only an admin, and one where their ownership is still an invitation.
    const other = await signUp(server, baseUrl);
    const asAdmin = await invite(server, other, 'admin', { email: owner.email });
    expectApiSuccess(await owner.api.post('/memberships/accept-invite', { token: asAdmin.token }, { token: owner.accessToken }), 200);
    const pending = await signUp(server, baseUrl);
    await invite(server, pending, 'owner', { email: owner.email });

    const owned = await server.services.organizations.ownedBy(`  ${owner.email.toUpperCase()}  `);
    expect(owned.map((o) => o.id)).to.deep.equal([owner.orgId, second.id]);
  });

  it('a plan change names the configured plans for an unknown one, 404s an unknown organization, and keeps a plan it already has', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const organizations = server.services.organizations;

    const unknown = await organizations.changePlan(owner.orgId, 'gold').then(() => null, (err: Error & { status?: number; details?: unknown }) => err);
    expect(unknown?.status).to.equal(400);
    expect(unknown?.details).to.deep.equal([{ field: 'plan', message: 'unknown plan' }]);
    expect(unknown?.message).to.equal(`Unknown plan "gold"; the configured plans are ${Object.keys(server.config.plans).join(', ')}`);
    expect(unknown?.message).to.contain('free, ');

    const missing = await organizations.changePlan('00000000-0000-4000-8000-000000000000', 'free').then(() => null, (err: Error & { status?: number }) => err);
    expect(missing?.status).to.equal(404);
    expect(missing?.message).to.equal('Organization not found');

    const moved = await organizations.changePlan(owner.orgId, 'free');
    expect(moved.previous).to.equal('unlimited');
    expect(moved.organization.plan).to.equal('free');
    const stamp = async () => (await server.db.models.Organization.query().findById(owner.orgId))!.updatedAt;
    const before = await stamp();
    const kept = await organizations.changePlan(owner.orgId, 'free');
    expect(kept.previous).to.equal('free');
    expect(kept.organization.plan).to.equal('free');
    expect((await stamp()).getTime(), 'no write for a plan it already has').to.equal(before.getTime());
    expectApiError(await owner.api.get('/organizations/billing/entitlements'), 401, 'unauthorized');
  });
});
