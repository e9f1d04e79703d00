// Channel secrets at rest (AES-256-GCM under ENCRYPTION_KEY) and the constant-time checks of provider signatures.
import { createCipheriv, createDecipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** Seals a JSON value as `v1.<iv>.<tag>.<ciphertext>` (base64url); opening checks the tag, so tampering fails. */
export class SecretSealer {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('The channel encryption key must be 32 bytes');
  }

  seal(value: unknown): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
  }

  open<T>(sealed: string): T {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('unreadable sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return JSON.parse(Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8')) as T;
  }
}

/** Equal strings in time independent of where they differ (length still shows, as for any MAC compare). */
export function safeEqualText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export const hmacHex = (secret: string, data: Buffer | string): string => createHmac('sha256', secret).update(data).digest('hex');

/** How far an email webhook's timestamp may be from now, in seconds. */
export const SIGNATURE_WINDOW_SECONDS = 300;

/** `X-Inbound-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + rawBody)>` within ±5 minutes. */
export function verifyInboundSignature(header: string, secret: string, raw: Buffer, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const parts = new Map(header.split(',').map((p) => p.trim().split('=', 2) as [string, string]));
  const t = parts.get('t');
  const given = parts.get('v1');
  if (!t || !/^\d{1,12}$/.test(t) || !given) return false;
  if (Math.abs(nowSeconds - Number(t)) > SIGNATURE_WINDOW_SECONDS) return false;
  return safeEqualText(given.toLowerCase(), hmacHex(secret, Buffer.concat([Buffer.from(`${t}.`), raw])));
}

/** The header a sender of signed inbound mail computes (tests, the bench, provider docs). */
export function signInbound(secret: string, raw: Buffer | string, t = Math.floor(Date.now() / 1000)): string {
  return `t=${t},v1=${hmacHex(secret, Buffer.concat([Buffer.from(`${t}.`), Buffer.from(raw)]))}`;
}

/** WhatsApp's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(appSecret, rawBody)>`. */
export function verifyHubSignature(header: string, appSecret: string, raw: Buffer): boolean {
  if (!header.startsWith('sha256=')) return false;
  return safeEqualText(header.slice(7).toLowerCase(), hmacHex(appSecret, raw));
}

/** Shows that a secret is set without showing it. */
export const mask = (secret: string | null | undefined): string | null => (secret ? `••••${secret.slice(-4)}` : null);
