// One log line per request: id, method, route, status and milliseconds.
import type { Middleware } from 'koa';
import type { Logger } from '../../server/logger.js';
import type { RequestState } from './state.js';

export function accessLog(logger: Pick<Logger, 'isLevelEnabled'>): Middleware<RequestState> {
  return async (ctx, next) => {
    try {
      await next();
    } finally {
      const level = ctx.status >= 500 ? 'error' : 'info';
      // Below the configured level the line is not built at all (nor the request's child logger).
      if (logger.isLevelEnabled(level)) {
        const ms = Math.round((performance.now() - ctx.state.startedAt) * 10) / 10;
        const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? null;
        ctx.state.log[level]({ method: ctx.method, route, path: route ? undefined : ctx.path, status: ctx.status, ms }, 'request');
      }
    }
  };
}
