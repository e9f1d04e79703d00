// Mounts every REST route under /api/v1 and serves the OpenAPI document generated from the same definitions.
import { Router } from '@koa/router';
import { agentRoutes } from './agent.js';
import { aiRoutes } from './ai.js';
import { analyticsRoutes } from './analytics.js';
import { observabilityRoutes } from './observability.js';
import { templateRoutes } from './templates.js';
import { contactRoutes } from './contacts.js';
import { ticketRoutes } from './tickets.js';
import { ticketAiRoutes } from './ticketsAi.js';
import { authRoutes } from './auth.js';
import { conversationRoutes } from './conversations.js';
import { healthRoutes } from './health.js';
import { membershipRoutes } from './memberships.js';
import { buildOpenApi } from './openapi.js';
import { notificationRoutes } from './notifications.js';
import { organizationRoutes } from './organizations.js';
import { RouteRegistry } from './registry.js';
import type { RouteServices } from './services.js';
import { widgetRoutes } from './widget.js';
import { storageRoutes } from './storage.js';
import { knowledgeRoutes } from './knowledge.js';
import { knowledgeAiRoutes } from './knowledgeAi.js';
import { apiKeyRoutes } from './apiKeys.js';
import { emailRoutes } from './email.js';
import { channelRoutes } from './channels.js';
import { channelInboundRoutes } from './channelsInbound.js';
import { channelAiRoutes } from './channelsAi.js';
import { webhookRoutes } from './webhooks.js';

export function createApiRouter(services: RouteServices): { router: Router; registry: RouteRegistry } {
  const registry = new RouteRegistry();
  let document: unknown = null;
  const openapi = () => (document ??= buildOpenApi(registry.routes, { serverUrl: services.config.publicUrl }));
  registry.add(
    ...healthRoutes(services, openapi),
    ...authRoutes(services),
    ...organizationRoutes(services),
    ...membershipRoutes(services),
    ...agentRoutes(services),
    ...conversationRoutes(services),
    ...widgetRoutes(services),
    ...notificationRoutes(services),
    ...templateRoutes(services),
    ...observabilityRoutes(services),
    ...aiRoutes(services),
    ...analyticsRoutes(services),
    ...contactRoutes(services),
    // The AI service's /tickets/ai paths before /tickets/:ticketId, which would take `ai` for an id.
    ...ticketAiRoutes(services),
    ...ticketRoutes(services),
    ...storageRoutes(services),
    // The AI service's /knowledge/ai paths before /knowledge/:documentId.
    ...knowledgeAiRoutes(services),
    ...knowledgeRoutes(services),
    ...apiKeyRoutes(services),
    ...emailRoutes(services),
    // Provider webhooks (/channels/<type>/inbound/...) before /channels/:channelId.
    ...channelInboundRoutes(services),
    ...channelAiRoutes(services),
    ...channelRoutes(services),
    ...webhookRoutes(services),
  );
  const router = new Router({ prefix: '/api/v1' });
  registry.mount(router, services);
  return { router, registry };
}
