// Rate limits per IP and per email (rate-limiter-flexible): Redis when configured, so all instances share counts.
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { RateLimited } from './errors.js';

interface Rule {
  /** Requests allowed per window and IP address. */
  perIp: number;
  /** Requests allowed per window and email address (when the request names one). */
  perEmail: number;
  windowSeconds: number;
}

export const RATE_LIMIT_RULES = {
  'initiate-signup': { perIp: 20, perEmail: 5, windowSeconds: 3600 },
  'resend-otp': { perIp: 20, perEmail: 5, windowSeconds: 900 },
  'verify-otp': { perIp: 60, perEmail: 15, windowSeconds: 900 },
  login: { perIp: 50, perEmail: 10, windowSeconds: 900 },
  'forgot-password': { perIp: 20, perEmail: 5, windowSeconds: 3600 },
  'reset-password': { perIp: 30, perEmail: 10, windowSeconds: 900 },
  'widget-token': { perIp: 120, perEmail: 120, windowSeconds: 60 },
  'qr-scan': { perIp: 60, perEmail: 60, windowSeconds: 60 },
} satisfies Record<string, Rule>;

export type RateLimitName = keyof typeof RATE_LIMIT_RULES;

export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();

  /** `rules`: the defaults above as changed by the RATE_LIMIT_* settings (config.rateLimits). */
  constructor(
    private readonly redis: Redis | null,
    rules: Record<RateLimitName, Rule> = RATE_LIMIT_RULES,
  ) {
    for (const [name, rule] of Object.entries(rules) as [RateLimitName, Rule][]) {
      this.limiters.set(`${name}:ip`, this.make(`rl:${name}:ip`, rule.perIp, rule.windowSeconds));
      this.limiters.set(`${name}:email`, this.make(`rl:${name}:email`, rule.perEmail, rule.windowSeconds));
    }
  }

  private make(keyPrefix: string, points: number, duration: number): RateLimiterAbstract {
    const memory = new RateLimiterMemory({ keyPrefix, points, duration });
    if (!this.redis) return memory;
    // While Redis is unreachable each instance counts on its own (the insurance limiter), so limits keep holding
    // per instance instead of failing the request; `rejectIfRedisNotReady` skips the doomed round trip.
    return new RateLimiterRedis({ storeClient: this.redis, keyPrefix, points, duration, insuranceLimiter: memory, rejectIfRedisNotReady: true });
  }

  /** Counts one request against the IP and (when given) the email; throws RateLimited with Retry-After. */
  async consume(name: RateLimitName, keys: { ip: string; email?: string | null }): Promise<void> {
    const attempts = [this.limiters.get(`${name}:ip`)!.consume(keys.ip)];
    if (keys.email) attempts.push(this.limiters.get(`${name}:email`)!.consume(keys.email.toLowerCase()));
    const results = await Promise.allSettled(attempts);
    let retryMs = 0;
    for (const result of results) {
      if (result.status === 'rejected') {
        if (!(result.reason instanceof RateLimiterRes)) throw result.reason;
        retryMs = Math.max(retryMs, result.reason.msBeforeNext);
      }
    }
    if (retryMs > 0) throw new RateLimited(retryMs / 1000);
  }
}
