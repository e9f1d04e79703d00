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
