// The Socket.IO Redis adapter: how an emit made on one instance reaches the sockets held by the others.
import { createAdapter, createShardedAdapter } from '@socket.io/redis-adapter';
import type { RedisAdapterKind } from '../server/config.js';
import type { Logger } from '../server/logger.js';
import type { RedisLink } from '../server/redis.js';

/**
 * sharded: Redis 7 sharded pub/sub with dynamic subscriptions: a channel per namespace and per room held on this
 * instance, and one listener that finds a message's adapter by its channel. An instance hears only what its rooms
 * need, and a message costs the same however many organizations are served.
 * classic: a pattern subscription and a listener per namespace on one connection: each message is offered to every
 * namespace's adapter, and Redis matches it against every namespace's pattern, so its cost grows with the organizations.
 */
export function redisAdapter(redis: RedisLink, kind: RedisAdapterKind, logger: Logger) {
  const pubClient = redis.client('socket.io-pub', 'publisher');
  const subClient = redis.client('socket.io-sub', 'subscriber');
  if (kind === 'classic') {
    // Listeners grow with the organizations served, by design, not by leak.
    pubClient.setMaxListeners(0);
    subClient.setMaxListeners(0);
    return createAdapter(pubClient, subClient);
  }
  // Before Redis 7 there is no SSUBSCRIBE: emits would stay on their instance, so say which setting to change.
  pubClient.on('ready', () => {
    void pubClient.info('server').then(
      (info) => {
        const major = Number(/redis_version:(\d+)/.exec(info)?.[1] ?? 0);
        if (major < 7) logger.error({ variable: 'REDIS_ADAPTER', redisVersion: /redis_version:(\S+)/.exec(info)?.[1] }, 'REDIS_ADAPTER=sharded needs Redis 7 or later (sharded pub/sub); set REDIS_ADAPTER=classic for this Redis');
      },
      () => undefined,
    );
  });
  return createShardedAdapter(pubClient, subClient, { subscriptionMode: 'dynamic' });
}
