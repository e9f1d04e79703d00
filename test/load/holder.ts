// Idle visitor sockets held in a process of their own (the cluster's tenants): one process can open only so many
// files, and the generator's are for the sockets it measures. Connects what it is given and keeps it open.
import { EioClient, ramp, type RampResult } from './lib/eio.js';
import { serveChild } from './lib/proc.js';

interface HeldVisitor {
  orgId: string;
  token: string;
  sessionId: string;
}

let held: EioClient[] = [];

const release = () => {
  for (const c of held) c.close();
  held = [];
};

serveChild(0, {
  connect: async ({ url, visitors, concurrency }: { url: string; visitors: HeldVisitor[]; concurrency: number }): Promise<RampResult> => {
    const clients = visitors.map((v) => new EioClient(url, v.orgId, { token: v.token, role: 'visitor', sessionId: v.sessionId }));
    held.push(...clients);
    return ramp(clients, concurrency);
  },
  connected: () => held.filter((c) => c.connected).length,
  release,
  stop: release,
});
