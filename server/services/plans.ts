// What each plan allows (`null` means unlimited): the built-in plans, and overrides read from configuration.
import type { Plan } from '../../db/models/Organization.js';

export const PLAN_LIMIT_NAMES = ['humanAgents', 'aiCallsPerMonth', 'knowledgeSources', 'widgets', 'channels', 'storageMb'] as const;
export type PlanLimitName = (typeof PLAN_LIMIT_NAMES)[number];
export type PlanLimits = Record<PlanLimitName, number | null>;

export interface PlanDefinition {
  limits: PlanLimits;
  features: string[];
}

export type PlanCatalog = Record<Plan, PlanDefinition>;

/** The plan new organizations get unless DEFAULT_PLAN names another: a self-hosted install is not capped. */
export const DEFAULT_PLAN = 'unlimited';

/** Plan names fit `organizations.plan` (varchar 20) and its format check. */
export const PLAN_NAME = /^[a-z][a-z0-9_-]{0,19}$/;

const NO_LIMITS: PlanLimits = { humanAgents: null, aiCallsPerMonth: null, knowledgeSources: null, widgets: null, channels: null, storageMb: null };
const ALL_FEATURES = ['live_chat', 'widget', 'templates', 'ai_assist', 'auto_assignment', 'analytics', 'email_channel', 'sso', 'audit_log', 'priority_support'];

export const BUILT_IN_PLANS: PlanCatalog = {
  free: {
    limits: { humanAgents: 3, aiCallsPerMonth: 1_000, knowledgeSources: 5, widgets: 1, channels: 1, storageMb: 500 },
    features: ['live_chat', 'widget', 'templates'],
  },
  pro: {
    limits: { humanAgents: 25, aiCallsPerMonth: 50_000, knowledgeSources: 100, widgets: 5, channels: 10, storageMb: 20_000 },
    features: ['live_chat', 'widget', 'templates', 'ai_assist', 'auto_assignment', 'analytics', 'email_channel'],
  },
  enterprise: { limits: { ...NO_LIMITS }, features: [...ALL_FEATURES] },
  unlimited: { limits: { ...NO_LIMITS }, features: [...ALL_FEATURES] },
};

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Applies overrides (`{ "<plan>": { "limits": { ... }, "features": [ ... ] } }`) to the built-in plans and returns
 * the catalog, or the problems found, each prefixed with `source`. A built-in plan keeps the limits and features
 * an override leaves out; a new plan starts with no limits and no features.
 */
export function resolvePlans(overrides: unknown, source: string): { plans: PlanCatalog; problems: string[] } {
  const plans: PlanCatalog = Object.fromEntries(Object.entries(BUILT_IN_PLANS).map(([name, p]) => [name, { limits: { ...p.limits }, features: [...p.features] }]));
  const problems: string[] = [];
  if (!isRecord(overrides)) return { plans, problems: [`${source} must be a JSON object of plans, like {"free": {"limits": {"humanAgents": 10}}}`] };
  for (const [name, override] of Object.entries(overrides)) {
    const where = `${source}: plan "${name}"`;
    if (!PLAN_NAME.test(name)) {
      problems.push(`${where}: a plan name is 1 to 20 lowercase letters, digits, _ or -, starting with a letter`);
      continue;
    }
    if (!isRecord(override)) {
      problems.push(`${where} must be an object with "limits" and/or "features"`);
      continue;
    }
    const plan = plans[name] ?? { limits: { ...NO_LIMITS }, features: [] };
    for (const key of Object.keys(override)) if (key !== 'limits' && key !== 'features') problems.push(`${where}: unknown key "${key}" (expected limits, features)`);
    if (override.limits !== undefined) {
      if (!isRecord(override.limits)) problems.push(`${where}: limits must be an object`);
      else {
        for (const [limit, value] of Object.entries(override.limits)) {
          if (!(PLAN_LIMIT_NAMES as readonly string[]).includes(limit)) problems.push(`${where}: unknown limit "${limit}" (expected ${PLAN_LIMIT_NAMES.join(', ')})`);
          else if (value !== null && !(Number.isSafeInteger(value) && (value as number) >= 0)) problems.push(`${where}: limit ${limit} must be a whole number >= 0, or null for unlimited`);
          else plan.limits[limit as PlanLimitName] = value as number | null;
        }
      }
    }
    if (override.features !== undefined) {
      if (!Array.isArray(override.features) || !override.features.every((f) => typeof f === 'string' && f.length > 0)) problems.push(`${where}: features must be an array of names`);
      else plan.features = [...new Set(override.features as string[])];
    }
    plans[name] = plan;
  }
  return { plans, problems };
}

/** True when one more unit fits under the limit. */
export function withinLimit(limit: number | null, current: number): boolean {
  return limit === null || current < limit;
}
