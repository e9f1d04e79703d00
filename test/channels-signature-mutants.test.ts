// The provider webhook checks themselves, with a fixed clock: the inbound mail signature and its five-minute window
// on both sides of now, WhatsApp's X-Hub-Signature-256 and the constant-time compare of secrets (Telegram's token).
import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { hmacHex, mask, safeEqualText, SecretSealer, signInbound, SIGNATURE_WINDOW_SECONDS, verifyHubSignature, verifyInboundSignature } from '../server/services/channels/crypto.js';

const SECRET = 'whsec-inbound-test';
const RAW = Buffer.from('From: a@example.test\r\nSubject: Hi\r\n\r\nHello');
const NOW = 1_800_000_000;
const v1 = (t: number | string, raw: Buffer = RAW, secret = SECRET) => createHmac('sha256', secret).update(`${t}.`).update(raw).digest('hex');

describe('Channels: webhook signatures', () => {
  describe('X-Inbound-Signature (mail)', () => {
    it('accepts its own signature at any time within five minutes either side of now, and not a second more', () => {
      expect(SIGNATURE_WINDOW_SECONDS).to.equal(300);
      for (const t of [NOW, NOW - 300, NOW + 300, NOW - 1, NOW + 1]) expect(verifyInboundSignature(`t=${t},v1=${v1(t)}`, SECRET, RAW, NOW), `t = now ${t - NOW}`).to.equal(true);
      // A replay from the past and a timestamp from the future are both outside the window.
      expect(verifyInboundSignature(`t=${NOW - 301},v1=${v1(NOW - 301)}`, SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`t=${NOW + 301},v1=${v1(NOW + 301)}`, SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`t=${NOW + 100_000},v1=${v1(NOW + 100_000)}`, SECRET, RAW, NOW)).to.equal(false);
    });

    it('signs `t.` followed by the raw bytes: other bytes, another secret or another t fail', () => {
      expect(signInbound(SECRET, RAW, NOW)).to.equal(`t=${NOW},v1=${v1(NOW)}`);
      expect(verifyInboundSignature(signInbound(SECRET, RAW, NOW), SECRET, RAW, NOW)).to.equal(true);
      expect(verifyInboundSignature(`t=${NOW},v1=${v1(NOW, Buffer.from('other'))}`, SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`t=${NOW},v1=${v1(NOW, RAW, 'another secret')}`, SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`t=${NOW - 1},v1=${v1(NOW)}`, SECRET, RAW, NOW)).to.equal(false);
      // The HMAC without the "t." prefix (the body alone) is not the signature.
      expect(verifyInboundSignature(`t=${NOW},v1=${hmacHex(SECRET, RAW)}`, SECRET, RAW, NOW)).to.equal(false);
    });

    it('reads the header loosely where senders differ: spaces after commas, either order, upper-case hex', () => {
      expect(verifyInboundSignature(`t=${NOW}, v1=${v1(NOW)}`, SECRET, RAW, NOW)).to.equal(true);
      expect(verifyInboundSignature(`v1=${v1(NOW)},t=${NOW}`, SECRET, RAW, NOW)).to.equal(true);
      expect(verifyInboundSignature(`t=${NOW},v1=${v1(NOW).toUpperCase()}`, SECRET, RAW, NOW)).to.equal(true);
    });

    it('refuses a header without its parts, or with a timestamp that is not plain digits', () => {
      expect(verifyInboundSignature('', SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`v1=${v1(NOW)}`, SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`t=${NOW}`, SECRET, RAW, NOW)).to.equal(false);
      expect(verifyInboundSignature(`t=${NOW},v1=`, SECRET, RAW, NOW)).to.equal(false);
      // Number() reads these as a time inside the window; the digits rule refuses them before.
      for (const t of [`${NOW}.0`, ` ${NOW}`, `0x${NOW.toString(16)}`, `${NOW}e0`, `+${NOW}`, `${NOW}\n`]) {
        expect(verifyInboundSignature(`t=${t},v1=${v1(t)}`, SECRET, RAW, NOW), JSON.stringify(t)).to.equal(false);
      }
      // At most 12 digits: 13 are refused however they compare (leading zeros keep the value inside the window).
      const padded = `000${NOW}`;
      expect(padded).to.have.length(13);
      expect(verifyInboundSignature(`t=${padded},v1=${v1(padded)}`, SECRET, RAW, NOW)).to.equal(false);
      const twelve = `00${NOW}`;
      expect(verifyInboundSignature(`t=${twelve},v1=${v1(twelve)}`, SECRET, RAW, NOW)).to.equal(true);
    });

    it('uses the clock when no time is given', () => {
      const now = Math.floor(Date.now() / 1000);
      expect(verifyInboundSignature(signInbound(SECRET, RAW), SECRET, RAW)).to.equal(true);
      expect(verifyInboundSignature(`t=${now - 3600},v1=${v1(now - 3600)}`, SECRET, RAW)).to.equal(false);
    });
  });

  describe('X-Hub-Signature-256 (WhatsApp)', () => {
    const APP_SECRET = 'meta-app-secret';
    const hub = (raw: Buffer | string) => createHmac('sha256', APP_SECRET).update(raw).digest('hex');

    it('accepts sha256=<hex HMAC of the raw body> in either case, and nothing else', () => {
      expect(verifyHubSignature(`sha256=${hub(RAW)}`, APP_SECRET, RAW)).to.equal(true);
      expect(verifyHubSignature(`sha256=${hub(RAW).toUpperCase()}`, APP_SECRET, RAW)).to.equal(true);
      expect(verifyHubSignature(`sha256=${hub('other')}`, APP_SECRET, RAW)).to.equal(false);
      expect(verifyHubSignature(`sha256=${createHmac('sha256', 'other').update(RAW).digest('hex')}`, APP_SECRET, RAW)).to.equal(false);
      // The right digest under another scheme's name, or none, is refused.
      expect(verifyHubSignature(`sha1=${hub(RAW)}`, APP_SECRET, RAW)).to.equal(false);
      expect(verifyHubSignature(`sha256:${hub(RAW)}`, APP_SECRET, RAW)).to.equal(false);
      expect(verifyHubSignature(hub(RAW), APP_SECRET, RAW)).to.equal(false);
      expect(verifyHubSignature(`xsha256=${hub(RAW)}`, APP_SECRET, RAW)).to.equal(false);
      expect(verifyHubSignature('', APP_SECRET, RAW)).to.equal(false);
    });
  });

  describe('secrets compared in constant time (Telegram secret token, verify tokens)', () => {
    it('answers equality, and false (never an exception) for another length', () => {
      expect(safeEqualText('s3cr3t-token', 's3cr3t-token')).to.equal(true);
      expect(safeEqualText('s3cr3t-token', 's3cr3t-tokeN')).to.equal(false);
      expect(safeEqualText('s3cr3t', 's3cr3t-token')).to.equal(false);
      expect(safeEqualText('s3cr3t-token-and-more', 's3cr3t-token')).to.equal(false);
      expect(safeEqualText('', 'x')).to.equal(false);
      // Lengths in bytes, not characters: an accented letter is two bytes in UTF-8.
      expect(safeEqualText('é', 'ab')).to.equal(false);
    });
  });
  describe('channel secrets at rest (ENCRYPTION_KEY)', () => {
    const KEY = Buffer.alloc(32, 7);

    it('takes a 32-byte key only', () => {
      for (const length of [0, 16, 31, 33]) expect(() => new SecretSealer(Buffer.alloc(length, 1)), `${length} bytes`).to.throw('The channel encryption key must be 32 bytes');
      expect(() => new SecretSealer(KEY)).not.to.throw();
    });

    it('opens what it sealed as v1.<iv>.<tag>.<ciphertext>, and refuses another version or missing parts in its own words', () => {
      const sealer = new SecretSealer(KEY);
      const sealed = sealer.seal({ botToken: 'secret-bot-token' });
      const [version, iv, tag, body] = sealed.split('.');
      expect(version).to.equal('v1');
      expect(sealer.open(sealed)).to.deep.equal({ botToken: 'secret-bot-token' });
      // Another version is not read as v1, even when the rest would open under v1.
      for (const other of [`v2.${iv}.${tag}.${body}`, `.${iv}.${tag}.${body}`, 'v1', `v1.${iv}`, `v1.${iv}.${tag}`, `v1..${tag}.${body}`, `v1.${iv}..${body}`]) {
        expect(() => sealer.open(other), other).to.throw('unreadable sealed secret');
      }
      // Another key, or a changed ciphertext, fails the tag.
      expect(() => new SecretSealer(Buffer.alloc(32, 8)).open(sealed)).to.throw();
      expect(() => sealer.open(`v1.${iv}.${tag}.${body!.slice(0, -2)}AA`)).to.throw();
    });

    it('shows a secret as four dots and its last four characters, and no secret as null', () => {
      expect(mask('secret-bot-token')).to.equal('••••oken');
      expect(mask('abc')).to.equal('••••abc');
      for (const none of ['', null, undefined]) expect(mask(none)).to.equal(null);
    });
  });
});
