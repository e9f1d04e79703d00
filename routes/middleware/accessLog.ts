// One log line per request: id, method, route, status and milliseconds.
import type { Middleware } from 'koa';
import type { RequestState } from './state.js';

export function accessLog(): Middleware<RequestState> {
  return async (ctx, next) => {
    try {
      await next();
    } finally {
      const ms = Math.round((performance.now() - ctx.state.startedAt) * 10) / 10;
      const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? null;
      const level = ctx.status >= 500 ? 'error' : 'info';
      ctx.state.log[level]({ method: ctx.method, route, path: route ? undefined : ctx.path, status: ctx.status, ms }, 'request');
    }
  };
}
