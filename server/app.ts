// The Koa application: the request envelope (id, security headers, error mapping, metrics, access log), CORS, then
// the API router.
import cors from '@koa/cors';
import Koa from 'koa';
import { createApiRouter } from '../routes/index.js';
import { envelope } from '../routes/middleware/envelope.js';
import { securityHeaders } from '../routes/middleware/securityHeaders.js';
import { splitCors } from '../routes/middleware/visitorCors.js';
import type { RequestState } from '../routes/middleware/state.js';
import type { RouteServices } from '../routes/services.js';
import { NotFound } from './errors.js';
import { createWebRouter } from './web/routes.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

export function createApp(services: RouteServices, logger: Logger, metrics?: Metrics) {
  const { config } = services;
  const app = new Koa<RequestState>({ proxy: config.trustProxy });
  const { routes, routers, registry } = createApiRouter(services);
  const allowed = new Set(config.corsOrigins);

  app.use(
    envelope({
      logger,
      record: metrics?.requestRecorder(),
      // JSON answers need no sources at all; useDefaults: false keeps Helmet from merging its page-oriented defaults in.
      headers: securityHeaders({ contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } }, crossOriginResourcePolicy: { policy: 'same-site' } }),
      isStopping: () => services.readiness.isStopping,
      exposeInternal: config.env === 'development',
    }),
  );
  const operatorCors = cors({
    // Only listed origins get CORS headers; '*' allows any origin (without credentials).
    origin: (ctx) => {
      const origin = ctx.get('origin');
      if (allowed.has('*')) return '*';
      return allowed.has(origin) ? origin : '';
    },
    allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
    allowHeaders: ['Authorization', 'Content-Type', 'X-Request-Id', 'x-ai-tool-secret'],
    exposeHeaders: ['X-Request-Id', 'Retry-After'],
    maxAge: 600,
  });
  app.use(
    splitCors(
      allowed.has('*')
        ? operatorCors
        : (ctx, next) => {
            // Without an Origin (servers, curl, same-origin reads) the CORS layer only adds `Vary: Origin`: done here
            // directly, without its awaits.
            if (ctx.req.headers.origin !== undefined) return operatorCors(ctx, next);
            ctx.vary('Origin');
            return next();
          },
    ),
  );
  app.use(createWebRouter(config).routes());
  if (metrics) app.use(metrics.publicRoute(config.metrics.token, config.metrics.port !== null));
  app.use(routes);
  app.use(registry.methodNotAllowed());
  app.use(async () => {
    throw new NotFound('Route');
  });
  return { app, routers, registry };
}
