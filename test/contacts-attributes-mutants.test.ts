// Custom contact attributes at their edges: how each type's value is stored, the words of each refusal naming the
// attribute, the length limits to the character, and a definition's label, options and description as kept.
import { expect } from 'chai';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';

describe('Contacts: attribute values and definitions, word by word', () => {
  let t: ContactsTenant;
  const refusal = async (attributes: Record<string, unknown>) => {
    const res = await as(t.agent).post('/contacts', { attributes });
    expect(res.status, JSON.stringify(res.body)).to.equal(400);
    return [res.body.message, res.body.error.details];
  };

  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'motto', label: 'Motto', type: 'text' });
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
    await defineAttribute(t.admin, { key: 'vip', label: 'VIP', type: 'boolean' });
    await defineAttribute(t.admin, { key: 'renews', label: 'Renews', type: 'date' });
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
    await defineAttribute(t.admin, { key: 'site', label: 'Site', type: 'link' });
  });

  it('stores each type as given, a date-time in UTC and a date alone as written', async () => {
    const text = 'x'.repeat(2000);
    const site = `https://example.test/${'a'.repeat(2048 - 'https://example.test/'.length)}`;
    const c = await createContact(t.agent, { attributes: { motto: text, seats: 0, vip: false, renews: '2026-03-01T10:00:00+02:00', plan: 'pro', site } });
    expect(c.attributes).to.deep.equal({ motto: text, seats: 0, vip: false, renews: '2026-03-01T08:00:00.000Z', plan: 'pro', site });
    const d = await createContact(t.agent, { attributes: { renews: '2026-03-01', site: 'http://example.test' } });
    expect(d.attributes).to.deep.equal({ renews: '2026-03-01', site: 'http://example.test' });
  });

  it('names the attribute and what it takes in each refusal, all of them at once', async () => {
    const invalid = (details: unknown[]) => ['Some attributes are not valid', details];
    expect(await refusal({ motto: 'x'.repeat(2001) })).to.deep.equal(invalid([{ field: 'attributes.motto', message: 'must be text of at most 2000 characters' }]));
    expect(await refusal({ seats: '3' })).to.deep.equal(invalid([{ field: 'attributes.seats', message: 'must be a number' }]));
    expect(await refusal({ vip: 'yes' })).to.deep.equal(invalid([{ field: 'attributes.vip', message: 'must be true or false' }]));
    expect(await refusal({ renews: 20260301 })).to.deep.equal(invalid([{ field: 'attributes.renews', message: 'must be an ISO 8601 date or date-time' }]));
    expect(await refusal({ renews: 'next spring' })).to.deep.equal(invalid([{ field: 'attributes.renews', message: 'must be an ISO 8601 date or date-time' }]));
    expect(await refusal({ plan: 'gold' })).to.deep.equal(invalid([{ field: 'attributes.plan', message: 'must be one of: free, pro' }]));
    for (const site of ['ftp://example.test/x', 'not a url', 5]) {
      expect(await refusal({ site }), String(site)).to.deep.equal(invalid([{ field: 'attributes.site', message: 'must be an http(s) URL' }]));
    }
    expect(await refusal({ shoe: 42, seats: 'many', motto: 'fine' })).to.deep.equal(invalid([
      { field: 'attributes.shoe', message: 'is not a defined attribute' },
      { field: 'attributes.seats', message: 'must be a number' },
    ]));
  });

  it('a change naming no attributes keeps them; null removes one key', async () => {
    const c = await createContact(t.agent, { name: 'Kay', attributes: { seats: 3, plan: 'free' } });
    expect(ok(await as(t.agent).patch(`/contacts/${c.id}`, { attributes: {} }), 200).attributes).to.deep.equal({ seats: 3, plan: 'free' });
    expect(ok(await as(t.agent).patch(`/contacts/${c.id}`, { attributes: { seats: null } }), 200).attributes).to.deep.equal({ plan: 'free' });
  });

  it('keeps a definition\'s label trimmed, its options trimmed and once each, its description; says each refusal', async () => {
    const def = await defineAttribute(t.admin, { key: 'tier', label: '  Tier  ', type: 'list', options: [' gold ', 'gold', 'silver'] });
    expect(def).to.include({ key: 'tier', label: 'Tier', type: 'list', description: null });
    expect(def.options).to.deep.equal(['gold', 'silver']);
    expect(await defineAttribute(t.admin, { key: 'since', label: 'Since', type: 'date', description: 'First order' })).to.include({ description: 'First order' });
    const patched = ok(await as(t.admin).patch('/contacts/attribute-definitions/tier', { label: ' Level ', description: 'The plan level', options: ['bronze ', ' bronze'] }), 200);
    expect(patched).to.include({ label: 'Level', description: 'The plan level' });
    expect(patched.options).to.deep.equal(['bronze']);
    // A change of the description alone keeps the label and the options.
    const described = ok(await as(t.admin).patch('/contacts/attribute-definitions/tier', { description: null }), 200);
    expect(described).to.include({ label: 'Level', description: null });
    expect(described.options).to.deep.equal(['bronze']);

    const again = await as(t.admin).post('/contacts/attribute-definitions', { key: 'tier', label: 'Again', type: 'text' });
    expect([again.status, again.body.message]).to.deep.equal([409, 'An attribute "tier" is already defined']);
    const empty = await as(t.admin).post('/contacts/attribute-definitions', { key: 'level', label: 'Level', type: 'list', options: [' '] });
    expect([empty.status, empty.body.message, empty.body.error.details]).to.deep.equal([400, 'A list attribute needs options', [{ field: 'options', message: 'at least one option' }]]);
    const extra = await as(t.admin).post('/contacts/attribute-definitions', { key: 'size', label: 'Size', type: 'number', options: ['1'] });
    expect([extra.status, extra.body.message, extra.body.error.details]).to.deep.equal([400, 'Only list attributes have options', [{ field: 'options', message: 'only for type list' }]]);
    const cleared = await as(t.admin).patch('/contacts/attribute-definitions/tier', { options: [] });
    expect([cleared.status, cleared.body.message]).to.deep.equal([400, 'A list attribute needs options']);
    for (const res of [await as(t.agent).get('/contacts/attribute-definitions/nope'), await as(t.admin).delete('/contacts/attribute-definitions/nope')]) {
      expect([res.status, res.body.message]).to.deep.equal([404, 'Attribute definition not found']);
    }
  });

  it('removing a definition removes its values from the contacts that had one, and marks them changed', async () => {
    await defineAttribute(t.admin, { key: 'shoe', label: 'Shoe', type: 'number' });
    const had = await createContact(t.agent, { name: 'Had', attributes: { shoe: 40, seats: 1 } });
    const none = await createContact(t.agent, { name: 'None', attributes: { seats: 1 } });
    ok(await as(t.admin).delete('/contacts/attribute-definitions/shoe'), 200);
    const [after, untouched] = [ok(await as(t.agent).get(`/contacts/${had.id}`), 200), ok(await as(t.agent).get(`/contacts/${none.id}`), 200)];
    expect(after.attributes).to.deep.equal({ seats: 1 });
    expect(Date.parse(after.updatedAt)).to.be.greaterThan(Date.parse(had.updatedAt));
    expect(untouched.updatedAt).to.equal(none.updatedAt);
  });
});
