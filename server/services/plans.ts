// What each plan allows. `null` means unlimited.
import type { Plan } from '../../db/models/Organization.js';

export interface PlanLimits {
  humanAgents: number | null;
  aiCallsPerMonth: number | null;
  knowledgeSources: number | null;
  widgets: number | null;
  channels: number | null;
  storageMb: number | null;
}

export interface PlanDefinition {
  limits: PlanLimits;
  features: string[];
}

export const PLANS: Record<Plan, PlanDefinition> = {
  free: {
    limits: { humanAgents: 3, aiCallsPerMonth: 1_000, knowledgeSources: 5, widgets: 1, channels: 1, storageMb: 500 },
    features: ['live_chat', 'widget', 'templates'],
  },
  pro: {
    limits: { humanAgents: 25, aiCallsPerMonth: 50_000, knowledgeSources: 100, widgets: 5, channels: 10, storageMb: 20_000 },
    features: ['live_chat', 'widget', 'templates', 'ai_assist', 'auto_assignment', 'analytics', 'email_channel'],
  },
  enterprise: {
    limits: { humanAgents: null, aiCallsPerMonth: null, knowledgeSources: null, widgets: null, channels: null, storageMb: null },
    features: ['live_chat', 'widget', 'templates', 'ai_assist', 'auto_assignment', 'analytics', 'email_channel', 'sso', 'audit_log', 'priority_support'],
  },
};

/** True when one more unit fits under the limit. */
export function withinLimit(limit: number | null, current: number): boolean {
  return limit === null || current < limit;
}
