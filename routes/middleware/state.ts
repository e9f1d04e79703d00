// Per-request state shared by the middleware chain and route handlers.
import type { Logger } from '../../server/logger.js';

export interface RequestState {
  requestId: string;
  log: Logger;
  startedAt: number;
}
