// API key scopes: `<area>:read` or `<area>:write` (write implies read), and the scope each REST route needs.
import type { Method } from '../../../routes/method.js';

export const SCOPE_AREAS = [
  'conversations', 'contacts', 'tickets', 'templates', 'knowledge', 'analytics', 'webhooks', 'notifications',
  'channels', 'email', 'storage', 'widget', 'agent', 'organization', 'members',
] as const;
export type ScopeArea = (typeof SCOPE_AREAS)[number];
export type Scope = `${ScopeArea}:${'read' | 'write'}`;

export const ALL_SCOPES: Scope[] = SCOPE_AREAS.flatMap((a) => [`${a}:read`, `${a}:write`] as Scope[]);

/** The area of a route, from the first segment of its path. */
const AREA_OF_SEGMENT: Record<string, ScopeArea> = {
  conversations: 'conversations', contacts: 'contacts', tickets: 'tickets', templates: 'templates', knowledge: 'knowledge',
  analytics: 'analytics', observability: 'analytics', webhooks: 'webhooks', notifications: 'notifications', channels: 'channels',
  email: 'email', storage: 'storage', widget: 'widget', agent: 'agent', organizations: 'organization', memberships: 'members',
};

/**
 * Areas whose admin-level routes a key never satisfies, whatever its scopes: a key cannot change who belongs to the
 * organization or the organization itself (and /api-keys has no area at all: a key never manages keys).
 */
const HUMAN_ONLY_ADMIN_AREAS = new Set<ScopeArea>(['organization', 'members']);

/** The scope an org route needs: explicit (`null`: no key may call it), else from its path and method. */
export function requiredScope(route: { method: Method; path: string; scope?: Scope | null }): Scope | null {
  if (route.scope !== undefined) return route.scope;
  const segment = route.path.split('/')[1] ?? '';
  const area = AREA_OF_SEGMENT[segment];
  if (!area) return null;
  return `${area}:${route.method === 'get' ? 'read' : 'write'}`;
}

/** Whether a key may call a route needing `role` and `scope`. Owner routes are for people only. */
export function keyAllows(scopes: readonly string[], scope: Scope | null, role: 'agent' | 'admin' | 'owner'): boolean {
  if (!scope || role === 'owner') return false;
  const [area, level] = scope.split(':') as [ScopeArea, 'read' | 'write'];
  if (role === 'admin' && HUMAN_ONLY_ADMIN_AREAS.has(area)) return false;
  return hasScope(scopes, area, level);
}

export function hasScope(scopes: readonly string[], area: ScopeArea, level: 'read' | 'write'): boolean {
  return scopes.includes(`${area}:write`) || (level === 'read' && scopes.includes(`${area}:read`));
}

/** How the OpenAPI document states it. */
export function describeScope(scope: Scope | null, role: 'agent' | 'admin' | 'owner'): string {
  if (!scope || role === 'owner' || (role === 'admin' && HUMAN_ONLY_ADMIN_AREAS.has(scope.split(':')[0] as ScopeArea))) {
    return 'API keys cannot call this route.';
  }
  const [area, level] = scope.split(':');
  return `API keys need the \`${scope}\` scope${level === 'read' ? ` (or \`${area}:write\`)` : ''}.`;
}
