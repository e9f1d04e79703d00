// Reusable schema pieces: field formats, pagination, and the shapes presenters return (for the OpenAPI document).
import type { JsonSchema } from '../registry.js';

export const uuid = { type: 'string', format: 'uuid' } as const;
export const email = { type: 'string', format: 'email', maxLength: 320 } as const;
export const password = { type: 'string', minLength: 8, maxLength: 128 } as const;
export const personName = { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' } as const;
export const otpCode = { type: 'string', pattern: '^[0-9]{6}$' } as const;
export const role = { type: 'string', enum: ['owner', 'admin', 'agent'] } as const;
export const nullableUrl = { type: ['string', 'null'], format: 'uri', maxLength: 2048 } as const;
export const dateTime = { type: 'string', format: 'date-time' } as const;
export const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;

export const paginationQuery = {
  limit: { type: 'integer', minimum: 1, maximum: 200, default: 50 },
  offset: { type: 'integer', minimum: 0, default: 0 },
} as const;

export function object(properties: Record<string, unknown>, required: string[] = []): JsonSchema {
  return { type: 'object', additionalProperties: false, properties, ...(required.length ? { required } : {}) };
}

/** Bounds of a free-form JSON value: nesting levels (the field itself is level 1) and its JSON text in UTF-8 bytes. */
export interface JsonLimits {
  maxDepth: number;
  maxBytes: number;
}

/** Deep enough for any real settings or metadata (2 to 4 levels), far from what recursive code cannot handle. */
export const FREE_FORM: JsonLimits = { maxDepth: 8, maxBytes: 16_384 };

/** The keywords createAjv checks without recursion; they also appear as such in the OpenAPI document. */
export function jsonLimits(limits: JsonLimits): JsonSchema {
  return { 'x-max-depth': limits.maxDepth, 'x-max-bytes': limits.maxBytes };
}

type FreeFormOptions = Partial<JsonLimits> & ({ type?: 'object'; maxProperties?: number } | { type: 'array'; maxItems?: number });

/**
 * A free-form JSON object (or array) whose content the API does not prescribe: still bounded in depth, size and
 * width, so that no stored value is too deep to copy or serialize. Over a bound: 400 validation_failed naming it.
 */
export function freeForm(opts: FreeFormOptions = {}): JsonSchema {
  const limits = { maxDepth: opts.maxDepth ?? FREE_FORM.maxDepth, maxBytes: opts.maxBytes ?? FREE_FORM.maxBytes };
  const width = opts.type === 'array' ? { type: 'array', maxItems: opts.maxItems ?? 200 } : { type: 'object', maxProperties: opts.maxProperties ?? 50 };
  const description = `Free-form JSON, at most ${limits.maxDepth} levels deep (this field is level 1) and ${limits.maxBytes} bytes as JSON`;
  return { ...width, description, ...jsonLimits(limits) };
}

export function params(...names: string[]): JsonSchema {
  return object(Object.fromEntries(names.map((n) => [n, uuid])), names);
}

/** Response shapes: documented, not validated at run time (presenters are the guarantee). */
export const UserView: JsonSchema = {
  type: 'object',
  properties: { id: uuid, email: { type: 'string' }, name: { type: 'string' }, avatarUrl: nullableUrl, emailVerified: { type: 'boolean' }, createdAt: dateTime },
  required: ['id', 'email', 'name', 'avatarUrl', 'emailVerified', 'createdAt'],
};

export const OrganizationView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    name: { type: 'string' },
    slug: { type: 'string' },
    domain: { type: ['string', 'null'] },
    logoUrl: nullableUrl,
    plan: { type: 'string', enum: ['free', 'pro', 'enterprise'] },
    settings: { type: 'object' },
    createdAt: dateTime,
    updatedAt: dateTime,
  },
  required: ['id', 'name', 'slug', 'plan', 'settings', 'createdAt', 'updatedAt'],
};

export const OrganizationEntryView: JsonSchema = {
  type: 'object',
  properties: { id: uuid, name: { type: 'string' }, slug: { type: 'string' }, role, plan: { type: 'string' } },
  required: ['id', 'name', 'slug', 'role', 'plan'],
};

export const MembershipView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    organizationId: uuid,
    userId: { type: ['string', 'null'], format: 'uuid' },
    name: { type: ['string', 'null'] },
    email: { type: 'string' },
    role,
    status: { type: 'string', enum: ['pending', 'accepted', 'suspended'] },
    invitedAt: nullableDateTime,
    activatedAt: nullableDateTime,
  },
  required: ['id', 'organizationId', 'userId', 'name', 'email', 'role', 'status', 'invitedAt', 'activatedAt'],
};

export const TokenPairView = {
  accessToken: { type: 'string', description: 'JWT, 15 minutes by default' },
  refreshToken: { type: 'string', description: 'JWT for POST /auth/refresh-token; rotated on every use' },
  accessTokenExpiresAt: { type: 'integer', description: 'Unix seconds' },
} as const;

export const SignedInView: JsonSchema = {
  type: 'object',
  properties: {
    user: UserView,
    organization: { oneOf: [OrganizationView, { type: 'null' }] },
    role: { type: ['string', 'null'], enum: ['owner', 'admin', 'agent', null] },
    organizations: { type: 'array', items: OrganizationEntryView },
    ...TokenPairView,
  },
  required: ['user', 'organization', 'role', 'organizations', 'accessToken', 'refreshToken'],
};
