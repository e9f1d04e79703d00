// Contact filters op by op and type by type (what each matches, including contacts without a value), the words of
// every refusal naming the filter it refuses, and the literal search's phone digits.
import { expect } from 'chai';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';

describe('Contacts: each filter op of each type', () => {
  let t: ContactsTenant;
  const filter = (filters: unknown[], match?: string) => as(t.agent).post('/contacts/filter?sort=name', { filters, ...(match ? { match } : {}) });
  const names = async (filters: unknown[], match?: string) => ok(await filter(filters, match), 200).map((c: any) => c.name);

  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
    await defineAttribute(t.admin, { key: 'renews', label: 'Renews', type: 'date' });
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
    await defineAttribute(t.admin, { key: 'vip', label: 'VIP', type: 'boolean' });
    await defineAttribute(t.admin, { key: 'motto', label: 'Motto', type: 'text' });
    await defineAttribute(t.admin, { key: 'site', label: 'Site', type: 'link' });
    await createContact(t.agent, { name: 'Ann', email: 'ann@a.example', phone: '+49 151 1111 2222', tags: ['vip'], attributes: { seats: 10, renews: '2027-03-01', plan: 'pro', vip: true, motto: 'Carpe Diem', site: 'https://ann.example' } });
    await createContact(t.agent, { name: 'Ben', email: 'ben@b.example', company: 'Acme', tags: ['trial'], attributes: { seats: 2, renews: '2026-01-01T10:00:00Z', plan: 'free', vip: false } });
    await createContact(t.agent, { name: 'Cy' });
  });

  it('text and link attributes: eq and contains ignore case, neq takes contacts without the value', async () => {
    expect(await names([{ key: 'motto', op: 'eq', value: 'carpe diem' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'motto', op: 'contains', value: 'PE D' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'motto', op: 'neq', value: 'CARPE DIEM' }])).to.deep.equal(['Ben', 'Cy']);
    expect(await names([{ key: 'site', op: 'contains', value: 'ann.' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'plan', op: 'neq', value: 'pro' }])).to.deep.equal(['Ben', 'Cy']);
    expect(await names([{ key: 'name', op: 'eq', value: '  ben ' }])).to.deep.equal(['Ben']);
    expect(await names([{ key: 'company', op: 'present', value: false }])).to.deep.equal(['Ann', 'Cy']);
    expect(await names([{ key: 'company', op: 'present', value: true }])).to.deep.equal(['Ben']);
    expect(await names([{ key: 'motto', op: 'present' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'motto', op: 'present', value: false }])).to.deep.equal(['Ben', 'Cy']);
  });

  it('numbers: eq, neq (also without a value), gt and lt', async () => {
    expect(await names([{ key: 'seats', op: 'eq', value: 2 }])).to.deep.equal(['Ben']);
    expect(await names([{ key: 'seats', op: 'neq', value: 2 }])).to.deep.equal(['Ann', 'Cy']);
    expect(await names([{ key: 'seats', op: 'gt', value: 2 }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'seats', op: 'lt', value: 10 }])).to.deep.equal(['Ben']);
  });

  it('dates: eq at the same instant, gt and lt; booleans: eq and neq (also without a value)', async () => {
    expect(await names([{ key: 'renews', op: 'eq', value: '2026-01-01T11:00:00+01:00' }])).to.deep.equal(['Ben']);
    expect(await names([{ key: 'renews', op: 'lt', value: '2027-01-01' }])).to.deep.equal(['Ben']);
    expect(await names([{ key: 'renews', op: 'gt', value: '2026-06-01' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'vip', op: 'eq', value: false }])).to.deep.equal(['Ben']);
    expect(await names([{ key: 'vip', op: 'neq', value: true }])).to.deep.equal(['Ben', 'Cy']);
  });

  it('tags: eq and contains have the tag, neq lacks it, present has any or none', async () => {
    expect(await names([{ key: 'tags', op: 'eq', value: 'VIP' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'tags', op: 'neq', value: 'vip' }])).to.deep.equal(['Ben', 'Cy']);
    expect(await names([{ key: 'tags', op: 'present' }])).to.deep.equal(['Ann', 'Ben']);
    expect(await names([{ key: 'tags', op: 'present', value: false }])).to.deep.equal(['Cy']);
  });

  it('times and phones: gt and lt; a phone by its digits however it is written, or as given when it is no number', async () => {
    expect(await names([{ key: 'createdAt', op: 'gt', value: '2000-01-01' }])).to.deep.equal(['Ann', 'Ben', 'Cy']);
    expect(await names([{ key: 'createdAt', op: 'lt', value: '2000-01-01' }])).to.deep.equal([]);
    expect(await names([{ key: 'phone', op: 'contains', value: '(151) 1111-22' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'phone', op: 'neq', value: '+4915111112222' }])).to.deep.equal(['Ben', 'Cy']);
    expect(await names([{ key: 'phone', op: 'eq', value: ' +49 151 1111 2222 ' }])).to.deep.equal(['Ann']);
    // eq reads the number (its national 0 goes), contains its digits as written.
    expect(await names([{ key: 'phone', op: 'eq', value: '+49 (0)151 1111 2222' }])).to.deep.equal(['Ann']);
    expect(await names([{ key: 'phone', op: 'eq', value: ' call me ' }])).to.deep.equal([]);
    expect(await names([{ key: 'phone', op: 'neq', value: ' call me ' }])).to.deep.equal(['Ann', 'Ben', 'Cy']);
    expect(ok(await as(t.agent).get(`/contacts?q=${encodeURIComponent('(151) 1111')}`), 200).map((c: any) => c.name)).to.deep.equal(['Ann']);
  });

  it('all or any: every filter, or at least one', async () => {
    expect(await names([{ key: 'tags', op: 'eq', value: 'vip' }, { key: 'seats', op: 'eq', value: 2 }])).to.deep.equal([]);
    expect(await names([{ key: 'tags', op: 'eq', value: 'vip' }, { key: 'seats', op: 'eq', value: 2 }], 'any')).to.deep.equal(['Ann', 'Ben']);
  });

  it('says what is wrong with a filter, naming it by its place in the list', async () => {
    const refusal = async (f: unknown) => {
      const res = await filter([{ key: 'name', op: 'present' }, f]);
      expect(res.status, JSON.stringify(res.body)).to.equal(400);
      return [res.body.message, res.body.error.details];
    };
    const at1 = (message: string) => ['A filter is not valid', [{ field: 'filters[1]', message }]];
    expect(await refusal({ key: 'nope', op: 'eq', value: 'x' })).to.deep.equal(at1('"nope" is neither a contact field nor a defined attribute'));
    expect(await refusal({ key: 'seats', op: 'contains', value: '1' })).to.deep.equal(at1('contains does not apply to seats; use eq, neq, present, gt, lt'));
    expect(await refusal({ key: 'name', op: 'present', value: 'yes' })).to.deep.equal(at1('present takes true (the default) or false'));
    expect(await refusal({ key: 'seats', op: 'gt', value: '3' })).to.deep.equal(at1('value must be a number'));
    expect(await refusal({ key: 'vip', op: 'eq', value: 'true' })).to.deep.equal(at1('value must be true or false'));
    expect(await refusal({ key: 'renews', op: 'gt', value: 'soon' })).to.deep.equal(at1('value must be an ISO 8601 date or date-time'));
    expect(await refusal({ key: 'createdAt', op: 'lt', value: 5 })).to.deep.equal(at1('value must be an ISO 8601 date or date-time'));
    expect(await refusal({ key: 'phone', op: 'eq', value: '  ' })).to.deep.equal(at1('value must be text'));
    expect(await refusal({ key: 'phone', op: 'contains', value: 5 })).to.deep.equal(at1('value must be text'));
    expect(await refusal({ key: 'motto', op: 'eq', value: ' ' })).to.deep.equal(at1('value must be non-empty text'));
    expect(await refusal({ key: 'motto', op: 'eq', value: 5 })).to.deep.equal(at1('value must be non-empty text'));
  });
});
