// What every request gets, in one middleware: its id (X-Request-Id), the security headers, the error mapping, the
// request metrics and the access log line (after the mapping, so both see the status the client got), and
// `Connection: close` while the instance stops. One layer instead of six: each Koa layer is an async function, a
// bound dispatch and promises per request, a visible part of a short request's work.
import type { ServerResponse } from 'node:http';
import type { Context, Middleware } from 'koa';
import type { Logger } from '../../server/logger.js';
import { logRequest } from './accessLog.js';
import { respondWithError } from './errors.js';
import { RequestScope, requestIdFrom } from './requestId.js';
import type { RequestState } from './state.js';

export interface EnvelopeOptions {
  logger: Logger;
  /** Records a finished request (method, route template, status, duration). */
  record?: (ctx: Context, startedAt: number) => void;
  /** Gives a response its security headers. */
  headers: (res: ServerResponse) => void;
  /** While stopping, keep-alive clients are told to reconnect (to another instance) after this response. */
  isStopping: () => boolean;
  exposeInternal: boolean;
}

export function envelope(o: EnvelopeOptions): Middleware<RequestState> {
  const { logger, record, headers, isStopping } = o;
  const mapping = { exposeInternal: o.exposeInternal };
  return async (ctx, next) => {
    const startedAt = performance.now();
    const id = requestIdFrom(ctx.req.headers['x-request-id']);
    ctx.state = new RequestScope(logger, id, startedAt);
    const res = ctx.res;
    res.setHeader('X-Request-Id', id);
    if (isStopping()) res.setHeader('Connection', 'close');
    try {
      headers(res);
      await next();
    } catch (thrown) {
      respondWithError(ctx, thrown, mapping);
    } finally {
      record?.(ctx, startedAt);
      logRequest(logger, ctx);
    }
  };
}
