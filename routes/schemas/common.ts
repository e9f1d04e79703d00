// Reusable schema pieces: field formats, pagination, and the shapes presenters return (for the OpenAPI document).
import type { JSONSchema } from 'json-schema-to-ts';
import type { JsonSchema } from '../registry.js';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, PERSON_NAME_MAX } from '../../server/limits.js';

export const uuid = { type: 'string', format: 'uuid' } as const;
export const email = { type: 'string', format: 'email', maxLength: 320 } as const;
export const password = { type: 'string', minLength: 8, maxLength: 128 } as const;
export const personName = { type: 'string', minLength: 1, maxLength: PERSON_NAME_MAX, pattern: '\\S' } as const;
export const otpCode = { type: 'string', pattern: '^[0-9]{6}$' } as const;
export const role = { type: 'string', enum: ['owner', 'admin', 'agent'] } as const;
export const nullableUrl = { type: ['string', 'null'], format: 'uri', maxLength: 2048 } as const;
export const dateTime = { type: 'string', format: 'date-time' } as const;
export const nullableDateTime = { type: ['string', 'null'], format: 'date-time' } as const;

/** A page size: at most PAGE_SIZE_MAX items, `byDefault` when the caller does not say. */
export const pageSize = <const N extends number = typeof PAGE_SIZE_DEFAULT>(byDefault?: N) =>
  ({ type: 'integer', minimum: 1, maximum: PAGE_SIZE_MAX, default: (byDefault ?? PAGE_SIZE_DEFAULT) as N }) as const;

export const paginationQuery = {
  limit: pageSize(),
  offset: { type: 'integer', minimum: 0, default: 0 },
} as const;

/** Schemas keep their literal types, so that handlers receive the type of exactly what the schema admits. */
export type Properties = Readonly<Record<string, JSONSchema>>;

export type ObjectSchema<P extends Properties, R extends readonly (keyof P & string)[]> = {
  readonly type: 'object';
  readonly additionalProperties: false;
  readonly properties: P;
} & (R extends readonly [] ? unknown : { readonly required: R });

/** A closed object: no properties but the named ones, `required` among them. */
export function object<const P extends Properties, const R extends readonly (keyof P & string)[] = []>(properties: P, required?: R): ObjectSchema<P, R> {
  return { type: 'object', additionalProperties: false, properties, ...(required?.length ? { required } : {}) } as ObjectSchema<P, R>;
}

/** Bounds of a free-form JSON value: nesting levels (the field itself is level 1) and its JSON text in UTF-8 bytes. */
export interface JsonLimits {
  maxDepth: number;
  maxBytes: number;
}

/** Deep enough for any real settings or metadata (2 to 4 levels), far from what recursive code cannot handle. */
export const FREE_FORM: JsonLimits = { maxDepth: 8, maxBytes: 16_384 };

/** The keywords createAjv checks without recursion; they also appear as such in the OpenAPI document. */
export function jsonLimits(limits: JsonLimits): { readonly 'x-max-depth': number; readonly 'x-max-bytes': number } {
  return { 'x-max-depth': limits.maxDepth, 'x-max-bytes': limits.maxBytes };
}

type FreeFormOptions = Partial<JsonLimits> & ({ type?: 'object'; maxProperties?: number } | { type: 'array'; maxItems?: number });
type FreeFormSchema<T extends 'object' | 'array'> = { readonly type: T; readonly description: string } & ReturnType<typeof jsonLimits>;

/**
 * A free-form JSON object (or array) whose content the API does not prescribe: still bounded in depth, size and
 * width, so that no stored value is too deep to copy or serialize. Over a bound: 400 validation_failed naming it.
 */
export function freeForm(opts?: FreeFormOptions & { type?: 'object' }): FreeFormSchema<'object'>;
export function freeForm(opts: FreeFormOptions & { type: 'array' }): FreeFormSchema<'array'>;
export function freeForm(opts: FreeFormOptions = {}): FreeFormSchema<'object' | 'array'> {
  const limits = { maxDepth: opts.maxDepth ?? FREE_FORM.maxDepth, maxBytes: opts.maxBytes ?? FREE_FORM.maxBytes };
  const width = opts.type === 'array' ? { type: 'array', maxItems: opts.maxItems ?? 200 } : { type: 'object', maxProperties: opts.maxProperties ?? 50 };
  const description = `Free-form JSON, at most ${limits.maxDepth} levels deep (this field is level 1) and ${limits.maxBytes} bytes as JSON`;
  return { ...width, description, ...jsonLimits(limits) } as FreeFormSchema<'object' | 'array'>;
}

/** Path parameters that are all ids. */
export function params<const N extends readonly string[]>(...names: N): ObjectSchema<{ readonly [K in N[number]]: typeof uuid }, N> {
  return object(Object.fromEntries(names.map((n) => [n, uuid])) as { [K in N[number]]: typeof uuid }, names);
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
