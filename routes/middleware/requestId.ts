// Echoes a well-formed inbound X-Request-Id or makes one; every log line of the request carries it.
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from '../../server/logger.js';
import type { RequestState } from './state.js';

const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

/** The inbound id when well-formed, else a fresh one (REST requests and socket connections alike). */
export function requestIdFrom(inbound: string | string[] | undefined): string {
  return typeof inbound === 'string' && WELL_FORMED.test(inbound) ? inbound : randomUUID();
}

export function requestId(logger: Logger): Middleware<RequestState> {
  return async (ctx, next) => {
    const id = requestIdFrom(ctx.get('x-request-id'));
    ctx.state.requestId = id;
    // The request's child logger is made when something logs: at the default level most requests log nothing, and
    // a child per request was a noticeable share of a short request's work.
    let log: Logger | undefined;
    Object.defineProperty(ctx.state, 'log', { get: () => (log ??= logger.child({ requestId: id })), configurable: true, enumerable: true });
    ctx.state.startedAt = performance.now();
    ctx.set('X-Request-Id', id);
    await next();
  };
}
