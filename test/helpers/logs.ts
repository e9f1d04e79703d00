// A logger whose lines a test can read back (parsed), for "logged once, naming the variable" assertions.
import { pino } from 'pino';
import type { Logger } from '../../server/logger.js';

export interface CapturedLogs {
  logger: Logger;
  lines: Array<Record<string, unknown> & { level: number; msg: string }>;
  /** Lines at `level` (pino numbers: 30 info, 40 warn, 50 error) whose message contains `text`. */
  matching(level: number, text: string): CapturedLogs['lines'];
}

export function captureLogs(level = 'debug'): CapturedLogs {
  const lines: CapturedLogs['lines'] = [];
  const logger = pino({ level, base: undefined }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines, matching: (lvl, text) => lines.filter((l) => l.level === lvl && String(l.msg).includes(text)) };
}

/**
 * Records unhandled promise rejections between start() and stop(). The test runner swallows them, while a real
 * instance would log them (or, before it had a policy, die of them): tests of failure paths assert there were none.
 */
export function unhandledRejections(): { reasons: unknown[]; start(): void; stop(): void } {
  const reasons: unknown[] = [];
  const listener = (reason: unknown) => void reasons.push(reason);
  return {
    reasons,
    start: () => void process.on('unhandledRejection', listener),
    stop: () => void process.off('unhandledRejection', listener),
  };
}
