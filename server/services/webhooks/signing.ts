// Webhook secrets: generated, kept encrypted at rest (AES-256-GCM under a key derived from a server secret, since
// they must stay usable for signing), and the signature a receiver checks.
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/** `whsec_` + 32 random bytes: the string shown to the admin is the HMAC key. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** hex HMAC-SHA256(secret, `${timestamp}.${rawBody}`): what X-Webhook-Signature carries as `v1=<hex>`. */
export function signPayload(secret: string, timestamp: string, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex');
}

/**
 * The X-Webhook-Signature value: `v1=<hex>` for the current secret, followed during a rotation's overlap by
 * `,v1=<hex>` for the previous one; a receiver accepts the delivery when any `v1` matches its secret.
 */
export function signatureHeader(secrets: string[], timestamp: string, rawBody: string): string {
  return secrets.map((s) => `v1=${signPayload(s, timestamp, rawBody)}`).join(',');
}

export class SecretBox {
  private readonly key: Buffer;

  /** `serverSecret`: a long-lived server secret; the box key is derived from it for this one purpose. */
  constructor(serverSecret: string) {
    this.key = createHmac('sha256', serverSecret).update('webhook-signing-secrets').digest();
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${body.toString('base64url')}`;
  }

  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('not a sealed webhook secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }
}
