// Redis connections (ioredis), only when REDIS_URL is set.
import { Redis } from 'ioredis';
import type { Logger } from './logger.js';

export function createRedis(url: string, logger: Logger, name: string): Redis {
  const client = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 3, enableOfflineQueue: true, connectionName: name });
  client.on('error', (err) => logger.warn({ err: err.message, redis: name }, 'redis error'));
  return client;
}
