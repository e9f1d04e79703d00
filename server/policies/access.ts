// A rule says who may do something: the least role of a person, and the scope an API key needs (keys act as agents).
import type { Role } from '../../db/models/Membership.js';
import type { OperatorActor } from '../auth/actor.js';
import { Forbidden } from '../errors.js';
import { describeScope, keyAllows, type Scope } from '../services/apiKeys/index.js';
import { assertRole } from './roles.js';

export interface Rule {
  role: Role;
  /** The scope an API key needs; null: no key may do it. */
  scope: Scope | null;
}

/**
 * Checks an operator against a rule: a key by its scopes, a person by the membership reloaded for this request or
 * event (never by a role remembered from a token).
 */
export function authorize(actor: OperatorActor, rule: Rule, membership: { role: Role; status: 'pending' | 'accepted' | 'suspended' } | null | undefined, refusal?: string): void {
  if (actor.apiKey) {
    if (!keyAllows(actor.apiKey.scopes, rule.scope, rule.role)) throw new Forbidden(`This API key may not do this (${describeScope(rule.scope, rule.role)})`);
    return;
  }
  assertRole(membership, rule.role, refusal);
}
