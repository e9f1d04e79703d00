// Inbound SMTP is opened only when SMTP_IN_PORT asks for it, and closed with the server.
import { connect } from 'node:net';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { startTestServer } from './helpers/server.js';
import { TEST_ENCRYPTION_KEY } from './helpers/channels.js';

/** The first line a server at `port` says, or the connection's error code. */
function greeting(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(5_000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('data', (chunk) => {
      socket.destroy();
      resolve(chunk.toString('utf8').split('\r\n')[0]!);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

describe('channels: the inbound SMTP listener', function () {
  this.timeout(120_000);

  it('is not opened without SMTP_IN_PORT', () => {
    expect(sharedServer().server.services.channels.smtpInPort).to.equal(null);
  });

  it('answers on SMTP_IN_PORT while the server runs, and is closed when it stops', async () => {
    const test = await startTestServer({ SMTP_IN_PORT: '0', ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, INBOUND_EMAIL_DOMAIN: 'in.platform.test' });
    let stopped = false;
    try {
      const port = test.server.services.channels.smtpInPort;
      expect(port).to.be.a('number').and.above(0);
      expect(await greeting(port!)).to.match(/^220 /);
      await test.stop();
      stopped = true;
      expect(await greeting(port!)).to.equal('ECONNREFUSED');
    } finally {
      if (!stopped) await test.stop();
    }
  });
});
