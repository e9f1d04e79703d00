// Room names inside one organization's namespace. Agent rooms and visitor rooms never overlap.
export const rooms = {
  /** Every operator socket of the organization. */
  agents: 'agents',
  user: (userId: string) => `user:${userId}`,
  /** Operator sockets of one server-side session (cut on logout). */
  session: (sessionId: string) => `session:${sessionId}`,
  /** Agents who opened one conversation. */
  conversation: (conversationId: string) => `conversation:${conversationId}`,
  /** The sockets of one widget visitor: the only room a visitor is ever in. */
  visitor: (visitorSessionId: string) => `visitor:${visitorSessionId}`,
};

export const NAMESPACE = /^\/orgs\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;
export const namespaceOf = (orgId: string) => `/orgs/${orgId}`;
