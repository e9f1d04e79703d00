// The rules of a contact's own fields: email and phone normalization, tags, limits and the after-commit hook.
import type { Knex } from 'knex';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { ValidationFailed } from '../../errors.js';
import { CONTACT_ATTRIBUTES_MAX, NOTE_LENGTH_MAX, TAG_LENGTH_MAX, TAGS_MAX } from '../../limits.js';

export const LIMITS = { tags: TAGS_MAX, attributes: CONTACT_ATTRIBUTES_MAX, noteLength: NOTE_LENGTH_MAX, tagLength: TAG_LENGTH_MAX } as const;

/** The fields a person or a source writes; `attributes` are checked against the definitions separately. */
export interface ContactFields {
  name?: string | null;
  email?: string | null;
  phone?: string | null;
  company?: string | null;
}

export const STANDARD_FIELDS = ['name', 'email', 'phone', 'company'] as const;
export type StandardField = (typeof STANDARD_FIELDS)[number];

export function normalizeEmail(email: string | null | undefined): string | null {
  const trimmed = email?.trim().toLowerCase();
  return trimmed ? trimmed : null;
}

/**
 * E.164 for anything libphonenumber recognizes as a possible number ("+49 151 2345 6789" -> "+4915123456789").
 * Without a leading + no country is assumed: such input is refused rather than guessed.
 */
export function normalizePhone(phone: string | null | undefined, field = 'phone'): string | null {
  const trimmed = phone?.trim();
  if (!trimmed) return null;
  const parsed = parsePhoneNumberFromString(trimmed);
  if (!parsed || !parsed.isPossible()) {
    throw new ValidationFailed('The phone number is not valid', [{ field, message: 'must be an international phone number, e.g. +49 151 23456789' }]);
  }
  return parsed.number;
}

export function normalizeText(value: string | null | undefined): string | null {
  const trimmed = value?.trim();
  return trimmed ? trimmed : null;
}

/** Tags are lowercase and unique; more than the limit is refused, not cut. */
export function normalizeTags(tags: string[], field = 'tags'): string[] {
  const out = [...new Set(tags.map(normalizeTag))];
  if (out.length > LIMITS.tags) throw new ValidationFailed(`A contact has at most ${LIMITS.tags} tags`, [{ field, message: `at most ${LIMITS.tags} tags` }]);
  return out;
}

export function normalizeTag(tag: string): string {
  return tag.trim().toLowerCase();
}

export function normalizeFields(input: ContactFields): ContactFields {
  const out: ContactFields = {};
  if (input.name !== undefined) out.name = normalizeText(input.name);
  if (input.email !== undefined) out.email = normalizeEmail(input.email);
  if (input.phone !== undefined) out.phone = normalizePhone(input.phone);
  if (input.company !== undefined) out.company = normalizeText(input.company);
  return out;
}

/**
 * Runs `fn` once the caller's transaction committed (at once without one): events never announce a row that a
 * later rollback takes back.
 */
export function afterCommit(trx: Knex.Transaction | undefined, fn: () => void): void {
  if (!trx) return fn();
  trx.executionPromise.then(fn, () => undefined);
}
