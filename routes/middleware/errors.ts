// The one place where anything thrown during a request becomes the contract's error body.
import type { Context } from 'koa';
import { toAppError, type AppError } from '../../server/errors.js';
import type { RequestState } from './state.js';

export function errorBody(err: AppError, requestId: string) {
  return {
    success: false as const,
    message: err.message,
    error: { code: err.code, details: err.details },
    requestId,
  };
}

/** Answers the request with what was thrown, mapped to its status, headers and error body. */
export function respondWithError(ctx: Context & { state: RequestState }, thrown: unknown, opts: { exposeInternal: boolean }): void {
  const err = toAppError(thrown);
  if (err.status >= 500) ctx.state.log.error({ err: thrown }, 'request failed');
  ctx.status = err.status;
  for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
  const body = errorBody(err, ctx.state.requestId);
  // Development only: the original error helps whoever is running the server locally.
  if (opts.exposeInternal && err.status >= 500 && thrown instanceof Error) {
    (body.error as Record<string, unknown>).internal = thrown.message;
  }
  ctx.body = body;
}
