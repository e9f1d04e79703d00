// The socket server's own promises that the handshake tests (all over websocket) leave open: a browser on any page
// reaches it by long-polling too, with CORS answered for that page's origin and never with credentials (sockets
// authenticate with a token in the handshake, not cookies), and the server does not hand out the client library.
import { expect } from 'chai';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { startTestServer } from './helpers/server.js';
import { connectOk, disconnected } from './helpers/sockets.js';

describe('socket server over HTTP long-polling', () => {
  it("answers a page's long-polling handshake with CORS for that page's origin, without credentials", async () => {
    const { baseUrl } = sharedServer();
    const origin = 'https://shop.example.test';
    const res = await fetch(`${baseUrl}/socket.io/?EIO=4&transport=polling`, { headers: { origin } });
    const body = await res.text();
    expect(res.status, body).to.equal(200);
    // Engine.IO's open packet: `0` and the session's parameters.
    expect(body).to.match(/^0\{"sid":"/);
    expect(res.headers.get('access-control-allow-origin')).to.equal(origin);
    expect(res.headers.get('access-control-allow-credentials')).to.equal(null);
  });

  it('does not serve the socket.io client library', async () => {
    const { baseUrl } = sharedServer();
    for (const file of ['socket.io.js', 'socket.io.min.js']) {
      const res = await fetch(`${baseUrl}/socket.io/${file}`);
      const body = await res.text();
      expect(res.status, file).to.not.equal(200);
      expect(res.headers.get('content-type') ?? '', file).to.not.match(/javascript/);
      expect(body, file).to.not.match(/\bio\b.*function|Socket\.IO/);
    }
  });
});

describe('an instance that stops', function () {
  this.timeout(60_000);

  it('tells its sockets to go and stops listening', async () => {
    const app = await startTestServer();
    let stopped = false;
    try {
      const owner = await signUp(app.server, app.baseUrl);
      const socket = await connectOk(app.baseUrl, owner.orgId, owner.accessToken);
      try {
        const gone = disconnected(socket, 10_000);
        await app.stop();
        stopped = true;
        // Told by the server or cut with the connection, whichever the client hears first.
        expect(await gone).to.be.oneOf(['io server disconnect', 'transport close']);
        const after = await fetch(`${app.baseUrl}/api/v1/health`, { signal: AbortSignal.timeout(3_000) }).then(
          (res) => `answered ${res.status}`,
          (err: Error) => `refused: ${(err.cause as { code?: string } | undefined)?.code ?? err.message}`,
        );
        expect(after).to.equal('refused: ECONNREFUSED');
      } finally {
        socket.close();
      }
    } finally {
      if (!stopped) await app.stop();
    }
  });
});
