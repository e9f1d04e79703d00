// Handshake admission: with more handshakes waiting for their caller than the instance answers soon, a new one is
// refused at once (`service_unavailable`, the contract's error body, `retryAfter` in seconds) instead of waiting past
// the client's timeout; a client that waits that long gets in. Under normal load nothing is refused.
import { expect } from 'chai';
import { io } from 'socket.io-client';
import { HandshakeAdmission } from '../sockets/admission.js';
import { signUp } from './helpers/factories.js';
import { newVisitor } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connect, connected, connectOk, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

interface Pool {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
  pool?: { max: number };
}

type Refusal = Error & { data?: { success: boolean; message: string; error: { code: string; details: unknown[] }; requestId: string; code: string; retryAfter: number } };

const refusedWith = (socket: ClientSocket, timeoutMs?: number) =>
  connected(socket, timeoutMs).then(
    () => null,
    (err: Refusal) => err,
  );

describe('socket handshake admission', function () {
  this.timeout(60_000);
  const track = closeAfterEach();

  describe('a server whose caller lookups are stuck', () => {
    let app: TestServer;
    // Two handshakes may wait; the rate of the last seconds allows no more while nothing is answered.
    before(async () => {
      app = await startTestServer({ SOCKET_HANDSHAKE_BACKLOG: '2', SOCKET_HANDSHAKE_MAX_WAIT_MS: '1000' });
    });
    after(async () => {
      await app?.stop();
    });

    it('refuses the next handshake at once with service_unavailable and retryAfter; the client that waits that long gets in', async () => {
      const owner = await signUp(app.server, app.baseUrl);
      const visitors = [await newVisitor(owner), await newVisitor(owner), await newVisitor(owner)];
      // The organization's namespace exists while a socket holds it (its creation reads the database too).
      track(await connectOk(app.baseUrl, owner.orgId, owner.accessToken));

      // Every pooled connection taken: caller lookups wait, as they do behind a storm of syncs and sends.
      const client = app.server.db.knex.client as unknown as Pool;
      const held: unknown[] = [];
      for (let i = 0; i < (client.pool?.max ?? 1); i++) held.push(await client.acquireConnection());
      let waiting: ClientSocket[];
      try {
        waiting = [track(connect(app.baseUrl, owner.orgId, visitors[0]!.token)), track(connect(app.baseUrl, owner.orgId, visitors[1]!.token))];
        await waitFor(() => app.server.realtime.handshakesWaiting() === 2, { what: 'two handshakes waiting for their caller' });
        // Answered while the lookups are still stuck: the refusal waits for nothing.
        const late = track(connect(app.baseUrl, owner.orgId, visitors[2]!.token));
        const refusal = await refusedWith(late);
        expect(refusal, 'the third handshake was let in').to.not.equal(null);
        expect(refusal!.message).to.equal('service_unavailable');
        const data = refusal!.data!;
        expect(data).to.have.all.keys('success', 'message', 'error', 'requestId', 'code', 'retryAfter');
        expect(data).to.include({ success: false, code: 'service_unavailable' });
        expect(data.error).to.deep.equal({ code: 'service_unavailable', details: [] });
        expect(data.message).to.be.a('string').and.not.equal('');
        expect(data.requestId).to.be.a('string').and.not.equal('');
        // Seconds: at least one, at most the cap of the wait plus the spread.
        expect(data.retryAfter).to.be.a('number').within(1, 30);
        expect(app.server.realtime.handshakesWaiting()).to.equal(2);

        for (const connection of held.splice(0)) await client.releaseConnection(connection);
        // The handshakes that waited are answered once the database is back.
        await Promise.all(waiting.map((s) => connected(s, 10_000)));

        // Honouring the refusal: connect again after retryAfter (and a jitter of the client's own).
        await new Promise((resolve) => setTimeout(resolve, data.retryAfter * 1000 + Math.random() * 200));
        late.connect();
        await connected(late, 10_000);
        expect(late.connected).to.equal(true);
      } finally {
        for (const connection of held) await client.releaseConnection(connection);
      }
    });
  });

  describe('a server under normal load', function () {
    this.timeout(180_000);
    let app: TestServer;
    before(async () => {
      app = await startTestServer();
    });
    after(async () => {
      await app?.stop();
    });

    it('lets in a burst of handshakes at once, visitors and agents, none refused', async () => {
      const owner = await signUp(app.server, app.baseUrl);
      const visitors = [await newVisitor(owner), await newVisitor(owner), await newVisitor(owner)];
      // 120 sockets at the same moment (several tabs per visitor, agents on several devices).
      const tokens = [...visitors.flatMap((v) => Array.from({ length: 30 }, () => v.token)), ...Array.from({ length: 30 }, () => owner.accessToken)];
      // A busy machine may take long to answer them all: the clients wait as long as it takes (no refusal is slow).
      const sockets = tokens.map((token) => track(io(`${app.baseUrl}/orgs/${owner.orgId}`, { path: '/socket.io', transports: ['websocket'], auth: { token }, reconnection: false, forceNew: true, timeout: 120_000 }) as ClientSocket));
      const outcomes = await Promise.all(sockets.map((s) => refusedWith(s, 120_000).then((err) => err?.message ?? 'connected')));
      expect(outcomes.filter((o) => o !== 'connected')).to.deep.equal([]);
      expect(app.server.realtime.handshakesWaiting()).to.equal(0);
    });
  });

  describe('the admission rule', () => {
    // A clock and a random source of the test's own: no time passes unless the test moves it.
    const rule = (limits: { backlog: number; maxWaitMs: number }, random = () => 0.5) => {
      const clock = { now: 100_000 };
      return { clock, admission: new HandshakeAdmission(limits, () => clock.now, random) };
    };

    it('lets the backlog wait and refuses the next, until one is answered', () => {
      const { admission } = rule({ backlog: 3, maxWaitMs: 1000 });
      expect([admission.enter(), admission.enter(), admission.enter()]).to.deep.equal([null, null, null]);
      expect(admission.inProgress).to.equal(3);
      const retryAfter = admission.enter();
      expect(retryAfter).to.be.a('number').within(1000, 30_000);
      expect(admission.inProgress).to.equal(3);
      admission.leave();
      expect(admission.enter()).to.equal(null);
    });

    it('lets more wait when the instance answered more lately, and forgets that rate after two seconds', () => {
      const { clock, admission } = rule({ backlog: 2, maxWaitMs: 1000 });
      // 100 answered in the last two seconds: 50 answered per second, so 50 may wait for a second.
      for (let i = 0; i < 100; i++) {
        expect(admission.enter()).to.equal(null);
        admission.leave();
      }
      for (let i = 0; i < 50; i++) expect(admission.enter(), `handshake ${i}`).to.equal(null);
      expect(admission.enter()).to.be.a('number');
      clock.now += 1_900;
      // Still within the window: once one of the 50 is answered, another may wait in its place.
      admission.leave();
      expect(admission.enter(), 'still within the window').to.equal(null);
      for (let i = 0; i < 48; i++) admission.leave();
      clock.now += 2_100;
      // Every answer is older than the window: only the backlog may wait, and 2 already do.
      expect(admission.inProgress).to.equal(2);
      expect(admission.enter()).to.be.a('number');
      admission.leave();
      expect(admission.enter()).to.equal(null);
    });

    it('sends refused clients back after the queue drains, spread over the time everyone refused lately needs', () => {
      const at = (random: number) => {
        const { admission } = rule({ backlog: 10, maxWaitMs: 1000 }, () => random);
        for (let i = 0; i < 10; i++) admission.enter();
        return admission;
      };
      // Nothing answered yet: assumed 10 per second. Ten waiting drain in 1 s; one refused spreads over at least 1 s.
      expect(at(0).enter()).to.equal(1000);
      expect(at(1).enter()).to.equal(2000);
      const busy = at(1);
      for (let i = 0; i < 99; i++) busy.enter();
      // The 100th refusal: 100 refused need 10 s at that rate.
      expect(busy.enter()).to.equal(1000 + 10_000);
      for (let i = 0; i < 1000; i++) busy.enter();
      // The spread is capped at 15 s (and the drain at 15 s).
      expect(busy.enter()).to.equal(1000 + 15_000);
    });

    it('sends a refused client back once the queue ahead has drained at the rate it is answered', () => {
      // Nothing answered yet: ten waiting for five seconds means two answered per second; ten drain in five seconds.
      const { admission } = rule({ backlog: 10, maxWaitMs: 5000 }, () => 0);
      for (let i = 0; i < 10; i++) expect(admission.enter()).to.equal(null);
      expect(admission.enter()).to.equal(5000);
    });

    it("learns the rate on the process's own clock when given none, and forgets it once two seconds have passed", async () => {
      const admission = new HandshakeAdmission({ backlog: 2, maxWaitMs: 1000 });
      // 100 answered just now (one synchronous burst, well within the two-second window): 50 may wait for a second.
      for (let i = 0; i < 100; i++) {
        expect(admission.enter()).to.equal(null);
        admission.leave();
      }
      for (let i = 0; i < 50; i++) expect(admission.enter(), `handshake ${i}`).to.equal(null);
      expect(admission.enter()).to.be.a('number');
      for (let i = 0; i < 50; i++) admission.leave();
      // At least the window later (any longer is the same): only the backlog may wait again.
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      expect([admission.enter(), admission.enter()]).to.deep.equal([null, null]);
      expect(admission.enter()).to.be.a('number');
    });
  });
});
