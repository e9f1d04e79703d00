// Mounts every REST route under /api/v1 and serves the OpenAPI document generated from the same definitions.
import { Router } from '@koa/router';
import type { Context, Middleware } from 'koa';
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

const PREFIX = '/api/v1';

/** The first segment of a path under /api/v1, as routes are grouped (lowercased: routing ignores case). */
function segmentOf(path: string): string {
  return (path.split('/', 2)[1] ?? '').toLowerCase();
}

type RouteLayer = Router['stack'][number];
type LayerContext = Context & { params?: Record<string, string>; captures?: string[]; matched?: RouteLayer[]; router?: Router; routeMatched?: boolean; routerPath?: string; _matchedRoute?: string; _matchedRouteName?: string };

/**
 * Runs a group router's routes as its own `routes()` middleware would, for the routes this file mounts (plain
 * paths, one middleware each, no router-level middleware): the router's layers match the path (its regular
 * expressions, case and trailing slash rules, HEAD for GET), the first layer of the path and method runs with the same
 * context fields set (`params`, `captures`, `matched`, `_matchedRoute`, ...). Without the router's per-request work:
 * debug calls per layer tested, a middleware chain and its composition built for each request.
 */
function dispatcher(router: Router): Middleware {
  const layers = router.stack.map((layer) => {
    const [only, ...more] = layer.stack as unknown as Middleware[];
    if (!only || more.length) throw new Error(`Route ${layer.path} must have exactly one middleware`);
    return { layer, path: String(layer.path), run: only };
  });
  return (context, next) => {
    const ctx = context as LayerContext;
    const path = ctx.path;
    const method = ctx.method;
    let matched: RouteLayer[] | undefined;
    let route: (typeof layers)[number] | undefined;
    for (const entry of layers) {
      if (!entry.layer.match(path)) continue;
      (matched ??= []).push(entry.layer);
      if (!route && entry.layer.methods.includes(method)) route = entry;
    }
    ctx.matched = matched ?? [];
    ctx.router = router;
    ctx.routeMatched = route !== undefined;
    if (!route) return next();
    const { layer } = route;
    ctx.captures = layer.captures(path);
    ctx.params = (ctx.request as Context['request'] & { params?: Record<string, string> }).params = layer.params(path, ctx.captures, ctx.params);
    ctx.routerPath = route.path;
    ctx._matchedRoute = route.path;
    if (layer.name) ctx._matchedRouteName = layer.name;
    return route.run(ctx, next);
  };
}

/**
 * The REST routes as Koa middleware. Routes are grouped by their first segment (`contacts`, `tickets`, ...), one
 * router per group, and a request goes straight to its group's router: a router tests every route it holds in turn,
 * and testing all 200 was a noticeable part of each request.
 */
export function createApiRouter(services: RouteServices): { routes: Middleware; routers: Router[]; registry: RouteRegistry } {
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
  const groups = new Map<string, Router>();
  registry.mount((path) => {
    const segment = segmentOf(path);
    let router = groups.get(segment);
    if (!router) groups.set(segment, (router = new Router({ prefix: PREFIX })));
    return router;
  }, services);
  const dispatch = new Map([...groups].map(([segment, router]) => [segment, dispatcher(router)]));
  const routes: Middleware = (ctx, next) => {
    const path = ctx.path;
    const group = path.startsWith(`${PREFIX}/`) ? dispatch.get(segmentOf(path.slice(PREFIX.length))) : undefined;
    return group ? group(ctx, next) : next();
  };
  return { routes, routers: [...groups.values()], registry };
}
