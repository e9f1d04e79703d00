// Custom attribute definitions (admin-defined, typed) and the check of attribute values against them.
import type { Knex } from 'knex';
import dbErrors from 'db-errors';
import type { Models } from '../../../db/index.js';
import type { AttributeType, ContactAttributeDefinition } from '../../../db/models/ContactAttributeDefinition.js';
import { Conflict, NotFound, ValidationFailed, type ErrorDetail } from '../../errors.js';
import { LIMITS } from './fields.js';

export interface DefinitionInput {
  key: string;
  label: string;
  type: AttributeType;
  options?: string[];
  description?: string | null;
}

export type DefinitionPatch = Partial<Pick<DefinitionInput, 'label' | 'options' | 'description'>>;

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const TEXT_MAX = 2000;

/**
 * A value as stored, or an error text. Dates are kept as given when date-only (YYYY-MM-DD), else as UTC ISO 8601,
 * so that text order is time order for either form.
 */
function coerce(def: ContactAttributeDefinition, value: unknown): { value: unknown } | { error: string } {
  switch (def.type) {
    case 'text':
      return typeof value === 'string' && value.length <= TEXT_MAX ? { value } : { error: `must be text of at most ${TEXT_MAX} characters` };
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? { value } : { error: 'must be a number' };
    case 'boolean':
      return typeof value === 'boolean' ? { value } : { error: 'must be true or false' };
    case 'date': {
      if (typeof value !== 'string') return { error: 'must be an ISO 8601 date or date-time' };
      const time = Date.parse(value);
      if (Number.isNaN(time)) return { error: 'must be an ISO 8601 date or date-time' };
      return { value: DATE_ONLY.test(value) ? value : new Date(time).toISOString() };
    }
    case 'list':
      return typeof value === 'string' && def.options.includes(value) ? { value } : { error: `must be one of: ${def.options.join(', ')}` };
    case 'link': {
      if (typeof value !== 'string' || value.length > 2048) return { error: 'must be an http(s) URL' };
      try {
        const url = new URL(value);
        return ['http:', 'https:'].includes(url.protocol) ? { value } : { error: 'must be an http(s) URL' };
      } catch {
        return { error: 'must be an http(s) URL' };
      }
    }
  }
}

export class ContactAttributes {
  constructor(private readonly deps: { models: Models; knex: Knex }) {}

  private get models() {
    return this.deps.models;
  }

  async list(orgId: string, trx?: Knex.Transaction): Promise<ContactAttributeDefinition[]> {
    return this.models.ContactAttributeDefinition.forOrg(orgId, trx).orderBy('key');
  }

  async get(orgId: string, key: string): Promise<ContactAttributeDefinition> {
    const def = await this.models.ContactAttributeDefinition.forOrg(orgId).where('key', key).first();
    if (!def) throw new NotFound('Attribute definition');
    return def;
  }

  async create(orgId: string, input: DefinitionInput): Promise<ContactAttributeDefinition> {
    const options = this.checkOptions(input.type, input.options ?? []);
    try {
      return await this.models.ContactAttributeDefinition.forOrg(orgId).insertAndFetch({ organizationId: orgId, key: input.key, label: input.label.trim(), type: input.type, options, description: input.description ?? null });
    } catch (err) {
      if (err instanceof dbErrors.UniqueViolationError) throw new Conflict(`An attribute "${input.key}" is already defined`);
      throw err;
    }
  }

  /** The key and the type stay fixed: stored values were checked against them. */
  async update(orgId: string, key: string, patch: DefinitionPatch): Promise<ContactAttributeDefinition> {
    const def = await this.get(orgId, key);
    const changes: Partial<ContactAttributeDefinition> = {};
    if (patch.label !== undefined) changes.label = patch.label.trim();
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.options !== undefined) changes.options = this.checkOptions(def.type, patch.options);
    return this.models.ContactAttributeDefinition.forOrg(orgId).patchAndFetchById(def.id, changes);
  }

  /** Removing a definition removes its values from every contact of the organization, in one transaction. */
  async remove(orgId: string, key: string): Promise<void> {
    await this.deps.knex.transaction(async (trx) => {
      const deleted = await this.models.ContactAttributeDefinition.forOrg(orgId, trx).where('key', key).delete().returning('id');
      if (deleted.length === 0) throw new NotFound('Attribute definition');
      await trx('contacts').where('organization_id', orgId).whereRaw('(attributes -> ?) is not null', [key]).update({ attributes: trx.raw('attributes - ?', [key]), updated_at: trx.fn.now() });
    });
  }

  /**
   * Applies `changes` to `current` key by key (null deletes a key) and checks every changed value against its
   * definition: an undefined key, a wrong type or more than the limit of attributes is 400.
   */
  async merge(orgId: string, current: Record<string, unknown>, changes: Record<string, unknown>, trx?: Knex.Transaction, field = 'attributes'): Promise<Record<string, unknown>> {
    const keys = Object.keys(changes);
    if (keys.length === 0) return current;
    const defs = new Map((await this.list(orgId, trx)).map((d) => [d.key, d]));
    const details: ErrorDetail[] = [];
    const next: Record<string, unknown> = { ...current };
    for (const key of keys) {
      const value = changes[key];
      if (value === null) {
        delete next[key];
        continue;
      }
      const def = defs.get(key);
      if (!def) {
        details.push({ field: `${field}.${key}`, message: 'is not a defined attribute' });
        continue;
      }
      const checked = coerce(def, value);
      if ('error' in checked) details.push({ field: `${field}.${key}`, message: checked.error });
      else next[key] = checked.value;
    }
    if (details.length) throw new ValidationFailed('Some attributes are not valid', details);
    if (Object.keys(next).length > LIMITS.attributes) throw new ValidationFailed(`A contact has at most ${LIMITS.attributes} attributes`, [{ field, message: `at most ${LIMITS.attributes} attributes` }]);
    return next;
  }

  private checkOptions(type: AttributeType, options: string[]): string[] {
    const unique = [...new Set(options.map((o) => o.trim()).filter(Boolean))];
    if (type === 'list' && unique.length === 0) throw new ValidationFailed('A list attribute needs options', [{ field: 'options', message: 'at least one option' }]);
    if (type !== 'list' && unique.length > 0) throw new ValidationFailed('Only list attributes have options', [{ field: 'options', message: 'only for type list' }]);
    return unique;
  }
}
