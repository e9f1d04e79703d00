// Authorization in one place per resource: the rules REST routes and socket events both apply.
import type { Rule } from './access.js';
import { conversationRules, type ConversationAction, type ConversationRules } from './conversation.js';

export { authorize, type Rule } from './access.js';
export { assertVisitorMessage } from './message.js';
export { assertActiveMember, assertRole, atLeast } from './roles.js';
export { assertNoteEditable } from './contact.js';
export { assertFileDeletable } from './file.js';
export type { ConversationAction, ConversationRules } from './conversation.js';

export interface Policies {
  conversation: ConversationRules;
}

/** Stricter (or looser) rules for one server, on top of the defaults: one change reaches REST and sockets alike. */
export interface PolicyOverrides {
  conversation?: Partial<Record<ConversationAction, Partial<Rule>>>;
}

export function createPolicies(overrides: PolicyOverrides = {}): Policies {
  const conversation = { ...conversationRules };
  for (const [action, rule] of Object.entries(overrides.conversation ?? {}) as [ConversationAction, Partial<Rule>][]) conversation[action] = { ...conversation[action], ...rule };
  return { conversation };
}
