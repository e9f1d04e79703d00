// The periodic removal of uploads never completed, run through the durable job queue: each instance asks for a
// sweep hourly and the dedupe key keeps one pending, so one instance does it.
import type { JobQueue } from '../jobs/index.js';
import type { Logger } from '../logger.js';
import type { StorageService } from './service.js';

export const STORAGE_SWEEP_QUEUE = 'storage-sweep';
const EVERY_MS = 3_600_000;

export function defineStorageSweep(jobs: JobQueue, storage: StorageService, logger: Logger): { start(): void; stop(): void } {
  jobs.define<Record<string, never>>({
    queue: STORAGE_SWEEP_QUEUE,
    retryDelaysSeconds: [60, 600],
    concurrency: 1,
    handle: async () => {
      let removed = 0;
      // Full batches mean more may be waiting.
      for (let n = await storage.sweepPending(); ; n = await storage.sweepPending()) {
        removed += n;
        if (n < 500) break;
      }
      if (removed) logger.info({ removed }, 'removed uploads never completed');
    },
  });
  let timer: NodeJS.Timeout | null = null;
  const request = () => void jobs.enqueue(STORAGE_SWEEP_QUEUE, {}, { dedupeKey: STORAGE_SWEEP_QUEUE }).catch((err) => logger.warn({ err }, 'could not schedule the storage sweep'));
  return {
    start() {
      request();
      timer = setInterval(request, EVERY_MS);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
    },
  };
}
