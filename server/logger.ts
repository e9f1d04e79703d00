// One pino logger per server; request-scoped children carry the request id.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['password', 'newPassword', 'currentPassword', 'token', 'refreshToken', 'accessToken', '*.password'], censor: '[redacted]' },
  });
}
