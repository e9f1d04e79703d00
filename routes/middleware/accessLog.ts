// One log line per request: id, method, route, status and milliseconds.
import type { Context } from 'koa';
import type { Logger } from '../../server/logger.js';
import type { RequestState } from './state.js';

/** Logs the finished request; below the configured level the line is not built at all (nor the child logger). */
export function logRequest(logger: Pick<Logger, 'isLevelEnabled'>, ctx: Context & { state: RequestState }): void {
  const level = ctx.status >= 500 ? 'error' : 'info';
  if (!logger.isLevelEnabled(level)) return;
  const ms = Math.round((performance.now() - ctx.state.startedAt) * 10) / 10;
  const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? null;
  ctx.state.log[level]({ method: ctx.method, route, path: route ? undefined : ctx.path, status: ctx.status, ms }, 'request');
}
