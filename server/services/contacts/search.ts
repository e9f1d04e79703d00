// Listing queries: literal text search, tag, a fixed set of sorts, and structured filters built with bindings only.
import type { QueryBuilder } from 'objection';
import type { Condition } from '../../../db/pages.js';
import { containsPattern } from '../../../db/search.js';
import type { Contact } from '../../../db/models/Contact.js';
import type { ContactAttributeDefinition } from '../../../db/models/ContactAttributeDefinition.js';
import { ValidationFailed } from '../../errors.js';
import { normalizePhone, normalizeTag } from './fields.js';

export const SORTS = ['createdAt', '-createdAt', 'updatedAt', '-updatedAt', 'name', '-name', 'lastActivityAt', '-lastActivityAt'] as const;
export type ContactSort = (typeof SORTS)[number];

// Fixed SQL per allowed sort (nothing from the request reaches ORDER BY); each matches an index of the migration.
const ORDER: Record<ContactSort, string> = {
  createdAt: 'contacts.created_at asc, contacts.id asc',
  '-createdAt': 'contacts.created_at desc, contacts.id desc',
  updatedAt: 'contacts.updated_at asc, contacts.id asc',
  '-updatedAt': 'contacts.updated_at desc, contacts.id desc',
  name: 'lower(contacts.name) asc, contacts.id asc',
  '-name': 'lower(contacts.name) desc, contacts.id desc',
  lastActivityAt: 'contacts.last_activity_at asc nulls last, contacts.id asc',
  '-lastActivityAt': 'contacts.last_activity_at desc nulls last, contacts.id asc',
};

export type FilterOp = 'eq' | 'neq' | 'contains' | 'present' | 'gt' | 'lt';
export interface ContactFilter {
  key: string;
  op: FilterOp;
  value?: unknown;
}

type Builder = QueryBuilder<Contact, Contact[]>;
type Kind = 'text' | 'phone' | 'tags' | 'time' | ContactAttributeDefinition['type'];

const STANDARD: Record<string, { column: string; kind: Kind }> = {
  name: { column: 'contacts.name', kind: 'text' },
  email: { column: 'contacts.email', kind: 'text' },
  phone: { column: 'contacts.phone', kind: 'phone' },
  company: { column: 'contacts.company', kind: 'text' },
  tags: { column: 'contacts.tags', kind: 'tags' },
  createdAt: { column: 'contacts.created_at', kind: 'time' },
  updatedAt: { column: 'contacts.updated_at', kind: 'time' },
  lastActivityAt: { column: 'contacts.last_activity_at', kind: 'time' },
  emailVerifiedAt: { column: 'contacts.email_verified_at', kind: 'time' },
};
export const STANDARD_FILTER_KEYS = Object.keys(STANDARD);

const OPS: Record<Kind, FilterOp[]> = {
  text: ['eq', 'neq', 'contains', 'present'],
  phone: ['eq', 'neq', 'contains', 'present'],
  link: ['eq', 'neq', 'contains', 'present'],
  list: ['eq', 'neq', 'present'],
  tags: ['eq', 'neq', 'contains', 'present'],
  time: ['present', 'gt', 'lt'],
  date: ['eq', 'present', 'gt', 'lt'],
  number: ['eq', 'neq', 'present', 'gt', 'lt'],
  boolean: ['eq', 'neq', 'present'],
};

export function orderBy(query: Builder, sort: ContactSort): Builder {
  return query.orderByRaw(ORDER[sort]);
}

/** The fixed ORDER BY of a sort. */
export function orderSql(sort: ContactSort): string {
  return ORDER[sort];
}

/** `q` is matched literally (its %, _ and \ are plain characters) against name, email, phone and company. */
export function textCondition(q: string): Condition {
  const like = containsPattern(q.trim());
  const or = ['contacts.name ilike ?', 'contacts.email ilike ?', 'contacts.company ilike ?', 'contacts.phone ilike ?'];
  const bindings = [like, like, like, like];
  // "+49 151 23" finds "+4915123...": phones are stored without separators.
  const digits = q.replace(/[\s().-]/g, '');
  if (digits && digits !== q.trim()) {
    or.push('contacts.phone ilike ?');
    bindings.push(containsPattern(digits));
  }
  return { sql: `(${or.join(' or ')})`, bindings };
}

export function tagCondition(tag: string): Condition {
  return { sql: 'contacts.tags @> ?::jsonb', bindings: [JSON.stringify([normalizeTag(tag)])] };
}

function invalid(index: number, message: string): ValidationFailed {
  return new ValidationFailed('A filter is not valid', [{ field: `filters[${index}]`, message }]);
}

/** Applies every filter (all of them, or any of them) to the query; unknown keys and ill-typed values are 400. */
export function applyFilters(query: Builder, filters: ContactFilter[], match: 'all' | 'any', defs: ContactAttributeDefinition[]): void {
  const byKey = new Map(defs.map((d) => [d.key, d]));
  // Everything is checked before the query is built, so a bad filter never meets the database.
  const conditions = filters.map((f, i) => condition(f, i, byKey));
  query.where((w) => {
    for (const add of conditions) (match === 'all' ? w.where.bind(w) : w.orWhere.bind(w))((sub: Builder) => add(sub));
  });
}

function condition(f: ContactFilter, i: number, defs: Map<string, ContactAttributeDefinition>): (w: Builder) => void {
  const standard = STANDARD[f.key];
  const def = standard ? null : defs.get(f.key);
  if (!standard && !def) throw invalid(i, `"${f.key}" is neither a contact field nor a defined attribute`);
  const kind: Kind = standard ? standard.kind : def!.type;
  if (!OPS[kind].includes(f.op)) throw invalid(i, `${f.op} does not apply to ${f.key}; use ${OPS[kind].join(', ')}`);
  if (f.op === 'present') {
    if (f.value !== undefined && typeof f.value !== 'boolean') throw invalid(i, 'present takes true (the default) or false');
    const present = f.value !== false;
    if (kind === 'tags') return (w) => void w.whereRaw(`jsonb_array_length(contacts.tags) ${present ? '>' : '='} 0`);
    if (standard) return (w) => void (present ? w.whereNotNull(standard.column) : w.whereNull(standard.column));
    return (w) => void w.whereRaw(`(contacts.attributes -> ?) is ${present ? 'not ' : ''}null`, [f.key]);
  }
  const value = checkValue(kind, f, i);
  // The column is a fixed name for standard fields; an attribute is read with its key bound as a parameter.
  const text = standard ? { sql: standard.column, bindings: [] as unknown[] } : { sql: '(contacts.attributes ->> ?)', bindings: [f.key] as unknown[] };
  switch (kind) {
    case 'text':
    case 'phone':
    case 'link':
    case 'list':
      if (f.op === 'contains') return (w) => void w.whereRaw(`${text.sql} ilike ?`, [...text.bindings, containsPattern(String(value))]);
      if (f.op === 'eq') return (w) => void w.whereRaw(`lower(${text.sql}) = lower(?)`, [...text.bindings, value]);
      return (w) => void w.whereRaw(`(${text.sql} is null or lower(${text.sql}) <> lower(?))`, [...text.bindings, ...text.bindings, value]);
    case 'tags': {
      const has = JSON.stringify([normalizeTag(String(value))]);
      return (w) => void w.whereRaw(`${f.op === 'neq' ? 'not ' : ''}(contacts.tags @> ?::jsonb)`, [has]);
    }
    case 'time':
      return (w) => void w.whereRaw(`${standard!.column} ${f.op === 'gt' ? '>' : '<'} ?::timestamptz`, [value]);
    case 'number': {
      // Guarded cast: conditions of a WHERE have no evaluation order, a CASE does.
      const num = `(case when jsonb_typeof(contacts.attributes -> ?) = 'number' then (contacts.attributes ->> ?)::numeric end)`;
      if (f.op === 'neq') return (w) => void w.whereRaw(`${num} is distinct from ?::numeric`, [f.key, f.key, value]);
      return (w) => void w.whereRaw(`${num} ${f.op === 'eq' ? '=' : f.op === 'gt' ? '>' : '<'} ?::numeric`, [f.key, f.key, value]);
    }
    case 'date': {
      const time = `(case when jsonb_typeof(contacts.attributes -> ?) = 'string' then (contacts.attributes ->> ?)::timestamptz end)`;
      return (w) => void w.whereRaw(`${time} ${f.op === 'eq' ? '=' : f.op === 'gt' ? '>' : '<'} ?::timestamptz`, [f.key, f.key, value]);
    }
    case 'boolean':
      if (f.op === 'neq') return (w) => void w.whereRaw(`(contacts.attributes -> ?) is distinct from ?::jsonb`, [f.key, JSON.stringify(value)]);
      return (w) => void w.whereRaw(`(contacts.attributes -> ?) = ?::jsonb`, [f.key, JSON.stringify(value)]);
  }
}

function checkValue(kind: Kind, f: ContactFilter, i: number): unknown {
  const v = f.value;
  switch (kind) {
    case 'number':
      if (!Number.isFinite(v)) throw invalid(i, 'value must be a number');
      return v;
    case 'boolean':
      if (typeof v !== 'boolean') throw invalid(i, 'value must be true or false');
      return v;
    case 'time':
    case 'date':
      if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) throw invalid(i, 'value must be an ISO 8601 date or date-time');
      return new Date(Date.parse(v)).toISOString();
    case 'phone':
      if (typeof v !== 'string' || !v.trim()) throw invalid(i, 'value must be text');
      if (f.op === 'contains') return v.replace(/[\s().-]/g, '');
      try {
        return normalizePhone(v, `filters[${i}].value`);
      } catch {
        return v.trim();
      }
    default:
      if (typeof v !== 'string' || !v.trim()) throw invalid(i, 'value must be non-empty text');
      return v.trim();
  }
}
