// GET /metrics: Prometheus text behind METRICS_TOKEN (404 without one configured), optionally on METRICS_PORT;
// counters move with traffic.
import { expect } from 'chai';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { connectOk } from './helpers/sockets.js';

const TOKEN = 'metrics-token-0123456789';

/** `name{labels} value` lines -> value by the full series text. */
function parse(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

const value = (series: Map<string, number>, name: string, labels: Record<string, string> = {}) => {
  for (const [key, v] of series) {
    if (!key.startsWith(`${name}{`) && key !== name) continue;
    if (Object.entries(labels).every(([k, l]) => key.includes(`${k}="${l}"`))) return v;
  }
  return 0;
};

describe('metrics', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ METRICS_TOKEN: TOKEN });
  });
  after(() => server?.stop());

  const scrape = async (token: string | null = TOKEN) => fetch(`${server.baseUrl}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

  it('answers 401 without the token or with a wrong one', async () => {
    expect((await scrape(null)).status).to.equal(401);
    expect((await scrape('wrong-token-0123456789')).status).to.equal(401);
  });

  it('serves Prometheus text whose counters move with traffic', async () => {
    const res = await scrape();
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.include('text/plain');
    const before = parse(await res.text());
    expect(value(before, 'process_cpu_user_seconds_total')).to.be.greaterThan(0);
    expect([...before.keys()].some((k) => k.startsWith('nodejs_eventloop_lag'))).to.equal(true);

    const owner = await signUp(server.server, server.baseUrl);
    const visitor = await newVisitor(owner);
    await startConversation(visitor, 'counted');
    const agent = await connectOk(server.baseUrl, owner.orgId, owner.accessToken);
    try {
      for (let i = 0; i < 3; i++) await owner.api.get('/conversations', { token: owner.accessToken });
      const after = parse(await (await scrape()).text());
      const route = { method: 'GET', route: '/api/v1/conversations', status: '200' };
      expect(value(after, 'http_requests_total', route) - value(before, 'http_requests_total', route)).to.equal(3);
      expect(value(after, 'http_request_duration_seconds_count', route)).to.be.at.least(3);
      expect(value(after, 'messages_sent_total', { sender: 'visitor' })).to.be.at.least(1);
      expect(value(after, 'sockets_connected', { kind: 'agent' })).to.equal(1);
      expect(after.has('queue_due_items{queue="mail"}')).to.equal(true);
      expect(value(after, 'db_pool_connections', { state: 'max' })).to.be.at.least(1);
      // Route templates, never raw paths with ids.
      expect([...after.keys()].some((k) => /route="[^"]*[0-9a-f]{8}-[0-9a-f]{4}/.test(k))).to.equal(false);
    } finally {
      agent.close();
    }
  });

  it('is not served on the public port without METRICS_TOKEN', async () => {
    const res = await fetch(`${sharedServer().baseUrl}/metrics`);
    expect(res.status).to.equal(404);
  });
});

describe('metrics on METRICS_PORT', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ METRICS_TOKEN: TOKEN, METRICS_PORT: '0' });
  });
  after(() => server?.stop());

  it('serves /metrics on its own port (still behind the token) and not on the public one', async () => {
    const port = server.server.metricsPort!;
    expect(port).to.be.a('number');
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).to.equal(401);
    const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).to.equal(200);
    expect(await res.text()).to.include('http_requests_total');
    expect((await fetch(`${server.baseUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).to.equal(404);
  });
});
