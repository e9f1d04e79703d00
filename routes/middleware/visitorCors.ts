// CORS for the widget's visitor routes, decided by each widget's allowedOrigins rather than CORS_ORIGINS.
import type { Context, Middleware, Next } from 'koa';
import { OriginNotAllowed, requestOrigin, type RequestOrigin } from '../../server/services/widget.js';

/** Visitor routes: everything under /widget but the admins' /widget/manage and /widget/qr. */
export function isVisitorPath(path: string): boolean {
  if (!path.startsWith('/api/v1/widget/')) return false;
  const rest = path.slice('/api/v1/widget/'.length).replace(/\/+$/, '');
  return rest !== 'manage' && rest !== 'qr';
}

export function originOf(ctx: Context): RequestOrigin {
  return requestOrigin({ origin: ctx.get('origin'), host: ctx.get('host'), secFetchSite: ctx.get('sec-fetch-site') });
}

/**
 * A preflight cannot name its widget (the public key of /widget/auth/token is in the body; other routes carry it in
 * a bearer token the browser does not send on a preflight), so preflights are answered for every origin. That is
 * safe: no credentials (cookies) are ever allowed, and the actual request checks the page's Origin against the
 * widget's allowedOrigins, answering 403 without CORS headers when it is not listed, so the page reads nothing.
 */
export async function visitorCors(ctx: Context, next: Next): Promise<void> {
  const origin = ctx.get('origin');
  ctx.vary('Origin');
  if (!origin) return next();
  if (ctx.method === 'OPTIONS' && ctx.get('access-control-request-method')) {
    ctx.set('Access-Control-Allow-Origin', origin);
    ctx.set('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
    ctx.set('Access-Control-Allow-Headers', 'Authorization, Content-Type, X-Request-Id');
    ctx.set('Access-Control-Max-Age', '600');
    ctx.status = 204;
    return;
  }
  let refused = false;
  try {
    await next();
  } catch (err) {
    refused = err instanceof OriginNotAllowed;
    throw err;
  } finally {
    if (!refused) {
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.set('Access-Control-Expose-Headers', 'X-Request-Id, Retry-After');
    }
  }
}

/** Visitor routes get the widget's CORS rules; every other route the operator API's. */
export function splitCors(operatorCors: Middleware): Middleware {
  return (ctx, next) => (isVisitorPath(ctx.path) ? visitorCors(ctx, next) : operatorCors(ctx, next));
}
