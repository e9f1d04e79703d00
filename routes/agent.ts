// /agent: your own agent profile, availability and workload in the active organization.
import { presentUser } from '../server/presenters/user.js';
import { AgentService, type AgentProfile } from '../server/services/agents.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { nullableUrl, object, personName, UserView } from './schemas/common.js';

const tag = 'Agent';
const auth = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const availability = { type: 'string', enum: ['online', 'away', 'busy', 'offline'] } as const;
const ProfileView = object({
  user: UserView,
  role: { type: 'string' },
  signature: { type: ['string', 'null'] },
  maxOpenConversations: { type: 'integer' },
  availability,
  status: { ...availability, description: 'What others see: offline without a live connection, else the chosen availability' },
});

function presentProfile(p: AgentProfile) {
  return {
    user: presentUser(p.user),
    role: p.membership.role,
    signature: p.membership.signature ?? null,
    maxOpenConversations: p.membership.maxOpenConversations,
    availability: p.membership.availability,
    status: AgentService.effectiveStatus(p.online, p.membership.availability),
  };
}

export function agentRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/agent/profile', operationId: 'getAgentProfile', tag, auth,
      summary: 'Your agent profile in the active organization',
      response: { status: 200, description: 'Profile', data: ProfileView },
      handler: async ({ orgId, actor }) => ({ message: 'Agent profile', data: presentProfile(await s.agents.profile(orgId, actor.userId)) }),
    }),
    defineRoute({
      method: 'put', path: '/agent/profile', operationId: 'updateAgentProfile', tag, auth,
      summary: 'Change your name, avatar, signature or the most open conversations auto-assignment gives you',
      body: { ...object({ name: personName, avatarUrl: nullableUrl, signature: { type: ['string', 'null'], maxLength: 1000 }, maxOpenConversations: { type: 'integer', minimum: 0, maximum: 1000 } }), minProperties: 1 },
      response: { status: 200, description: 'Profile', data: ProfileView },
      handler: async ({ orgId, actor, body }) => ({ message: 'Agent profile updated', data: presentProfile(await s.agents.updateProfile(orgId, actor.userId, body)) }),
    }),
    defineRoute({
      method: 'patch', path: '/agent/status', operationId: 'setAgentStatus', tag, auth,
      summary: 'Choose your availability; agents of the organization receive user_status_update',
      body: object({ status: availability }, ['status']),
      response: { status: 200, description: 'Status', data: object({ availability, status: availability }) },
      handler: async ({ orgId, actor, body }) => ({ message: 'Status updated', data: { availability: body.status, status: await s.agents.setStatus(orgId, actor.userId, body.status) } }),
    }),
    defineRoute({
      method: 'get', path: '/agent/stats', operationId: 'getAgentStats', tag, auth,
      summary: 'Your open and resolved conversations, average first-response and resolution times (seconds)',
      response: {
        status: 200, description: 'Stats',
        data: object({ openConversations: { type: 'integer' }, resolvedConversations: { type: 'integer' }, closedConversations: { type: 'integer' }, avgFirstResponseSeconds: { type: ['integer', 'null'] }, avgResolutionSeconds: { type: ['integer', 'null'] } }),
      },
      handler: async ({ orgId, actor }) => ({ message: 'Agent stats', data: await s.agents.stats(orgId, actor.userId) }),
    }),
  ];
}
