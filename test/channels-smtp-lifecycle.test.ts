// Inbound SMTP is opened only when SMTP_IN_PORT asks for it, and closed with the server; SES mail through SNS taken
// from any topic (no SNS_TOPIC_ARNS) is said in the log at start.
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { startTestServer } from './helpers/server.js';
import { TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { captureLogs } from './helpers/logs.js';

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

describe('channels: a taken SMTP_IN_PORT', function () {
  this.timeout(120_000);
  let blocker: Server;
  before(async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', () => resolve()));
  });
  after(async () => {
    await new Promise((resolve) => blocker.close(resolve));
  });

  it('fails the start with an error naming SMTP_IN_PORT and the port, the listener\'s error logged as a warning', async () => {
    const port = (blocker.address() as AddressInfo).port;
    const logs = captureLogs('info');
    // startTestServer closes what the failed start had opened (the database, the jobs) before it rethrows.
    const failure = await startTestServer({ SMTP_IN_PORT: String(port), ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, INBOUND_EMAIL_DOMAIN: 'in.platform.test' }, { logger: logs.logger }).then(
      async (test) => {
        await test.stop();
        return null;
      },
      (err: Error) => err,
    );
    expect(failure, 'the server started on a taken SMTP_IN_PORT').to.be.instanceOf(Error);
    expect(failure!.message).to.equal(`SMTP_IN_PORT ${port} on 127.0.0.1 cannot be opened: listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
    expect((failure!.cause as NodeJS.ErrnoException).code).to.equal('EADDRINUSE');
    expect(logs.matching(40, 'inbound SMTP').map((l) => [l.msg, (l.err as { code?: string } | undefined)?.code])).to.deep.equal([['inbound SMTP error', 'EADDRINUSE']]);
  });
});

describe('channels: SES mail through SNS without SNS_TOPIC_ARNS', function () {
  this.timeout(120_000);
  const WARNING = 'EMAIL_INBOUND_SNS is on without SNS_TOPIC_ARNS: mail from any SNS topic is taken (refused in production)';

  /** The warnings a server logs while it starts with these settings. */
  const startWarnings = async (env: Record<string, string>) => {
    const logs = captureLogs('info');
    const test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, ...env }, { logger: logs.logger });
    await test.stop();
    return logs.matching(40, 'SNS').map((l) => l.msg);
  };

  it('warns once at start that mail from any topic is taken, and not when the topics are listed', async () => {
    expect(await startWarnings({ EMAIL_INBOUND_SNS: 'true' })).to.deep.equal([WARNING]);
    expect(await startWarnings({ EMAIL_INBOUND_SNS: 'true', SNS_TOPIC_ARNS: 'arn:aws:sns:eu-west-1:123456789012:ses-inbound' })).to.deep.equal([]);
  });
});
