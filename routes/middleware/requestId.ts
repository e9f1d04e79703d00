// Echoes a well-formed inbound X-Request-Id or makes one; every log line of the request carries it.
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../server/logger.js';
import type { RequestState } from './state.js';

const WELL_FORMED = /^[A-Za-z0-9._:-]{1,128}$/;

/** The inbound id when well-formed, else a fresh one (REST requests and socket connections alike). */
export function requestIdFrom(inbound: string | string[] | undefined): string {
  return typeof inbound === 'string' && WELL_FORMED.test(inbound) ? inbound : randomUUID();
}

/**
 * A request's state. Its child logger is made when something logs: at the default level most requests log nothing,
 * and a child per request was a noticeable share of a short request's work. A class, so each request costs one
 * object and no closure.
 */
export class RequestScope implements RequestState {
  private child: Logger | undefined;

  constructor(
    private readonly logger: Logger,
    readonly requestId: string,
    readonly startedAt: number,
  ) {}

  get log(): Logger {
    return (this.child ??= this.logger.child({ requestId: this.requestId }));
  }
}
