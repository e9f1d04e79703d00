// Echoes a well-formed inbound X-Request-Id or makes one; every log line of the request carries it.
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from '../../server/logger.js';
import type { RequestState } from './state.js';

const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestId(logger: Logger): Middleware<RequestState> {
  return async (ctx, next) => {
    const inbound = ctx.get('x-request-id');
    const id = WELL_FORMED.test(inbound) ? inbound : randomUUID();
    ctx.state.requestId = id;
    ctx.state.log = logger.child({ requestId: id });
    ctx.state.startedAt = performance.now();
    ctx.set('X-Request-Id', id);
    await next();
  };
}
