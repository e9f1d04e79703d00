// An organization's mail sender identity: who its mail is From, where replies go, the signature, and the DNS
// records that prove it may send as its own domain. Until that proof is found, mail leaves from the platform's
// address as "<Org> via <platform>" with Reply-To the organization's address (SPF/DKIM stay the platform's); once
// found, the organization's mail leaves From its own address, DKIM-signed with its own key for its domain.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { resolveTxt } from 'node:dns/promises';
import type { Knex } from 'knex';
import { Conflict } from '../../errors.js';
import type { SecretSealer } from '../channels/crypto.js';
import { parseMailbox, type MailAddress } from '../../mail/address.js';

/** The stored identity (camelCase through knex's mappers). */
export interface EmailIdentityRow {
  organizationId: string;
  fromName: string | null;
  fromAddress: string | null;
  replyTo: string | null;
  signature: string | null;
  verificationToken: string;
  verifiedDomain: string | null;
  domainVerifiedAt: Date | null;
  dkimSelector: string | null;
  /** Sealed PKCS#8 PEM. */
  dkimPrivateKey: string | null;
  /** Base64 DER (SubjectPublicKeyInfo), as the DNS record carries it. */
  dkimPublicKey: string | null;
  /** A rotation's next key (same forms), signing nothing until its record is found in DNS. */
  dkimNextSelector: string | null;
  dkimNextPrivateKey: string | null;
  dkimNextPublicKey: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface EmailIdentityInput {
  fromName?: string | null;
  fromAddress?: string | null;
  replyTo?: string | null;
  signature?: string | null;
}

export interface DnsRecord {
  type: 'TXT';
  name: string;
  value: string;
  purpose: 'verification' | 'spf' | 'dkim' | 'dkim_next';
}

export interface EmailIdentityView {
  fromName: string | null;
  fromAddress: string | null;
  replyTo: string | null;
  signature: string | null;
  domain: string | null;
  domainVerified: boolean;
  domainVerifiedAt: string | null;
  dnsRecords: DnsRecord[];
}

/** What nodemailer's `dkim` option takes to sign one mail. */
export interface DkimKey {
  domainName: string;
  keySelector: string;
  privateKey: string;
}

/** From and Reply-To of one organization mail. */
export interface MailSender {
  from: MailAddress;
  replyTo?: string;
}

/** The TXT host that carries the verification token of a domain. */
export const VERIFICATION_HOST = '_support-verification';
export type TxtResolver = (host: string) => Promise<string[][]>;

/** A DNS record's text with its chunks joined and no whitespace, so `p=` can be compared as published. */
const compact = (chunks: string[]) => chunks.join('').replace(/\s+/g, '');

const domainOf = (address: string | null): string | null => (address && address.includes('@') ? address.split('@').pop()!.toLowerCase() : null);

/** Verified only for the domain the proof was found on: changing the from address to another domain unverifies it. */
const isVerified = (row: Pick<EmailIdentityRow, 'fromAddress' | 'verifiedDomain' | 'domainVerifiedAt'>): boolean => !!row.domainVerifiedAt && !!row.verifiedDomain && row.verifiedDomain === domainOf(row.fromAddress);

export class EmailIdentityService {
  /** Where TXT records are looked up: the system's resolver (tests answer from the records they published). */
  lookupTxt: TxtResolver;

  constructor(private readonly deps: { knex: Knex; mailFrom: string; sealer: SecretSealer; resolveTxt?: TxtResolver }) {
    this.lookupTxt = deps.resolveTxt ?? resolveTxt;
  }

  private row(orgId: string, db: Knex | Knex.Transaction = this.deps.knex): Promise<EmailIdentityRow | undefined> {
    return db('email_identities').where({ organizationId: orgId }).first() as Promise<EmailIdentityRow | undefined>;
  }

  private async ensure(orgId: string): Promise<EmailIdentityRow> {
    await this.deps.knex('email_identities').insert({ organizationId: orgId, verificationToken: randomBytes(16).toString('hex') }).onConflict('organization_id').ignore();
    const row = (await this.row(orgId))!;
    if (row.dkimPrivateKey) return row;
    // One key per identity, made the first time it is needed (identities made before DKIM get theirs here too).
    const key = this.newKey();
    await this.deps.knex('email_identities').where({ organizationId: orgId }).whereNull('dkimPrivateKey').update({ dkimSelector: key.selector, dkimPrivateKey: key.privateKey, dkimPublicKey: key.publicKey });
    return (await this.row(orgId))!;
  }

  /** A fresh 2048-bit key under a selector of its own: the private half sealed, the public half as DNS carries it. */
  private newKey(): { selector: string; privateKey: string; publicKey: string } {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    return {
      selector: `sp${randomBytes(4).toString('hex')}`,
      privateKey: this.deps.sealer.seal(privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()),
      publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    };
  }

  /**
   * Starts a DKIM key rotation: a next key under a new selector, listed in `dnsRecords` (`dkim_next`) to publish.
   * The current key keeps signing until `verify` finds the next record in DNS; one rotation waits at a time (409).
   */
  async rotateDkim(orgId: string): Promise<EmailIdentityView> {
    await this.ensure(orgId);
    const key = this.newKey();
    const started = await this.deps.knex('email_identities').where({ organizationId: orgId }).whereNull('dkimNextSelector')
      .update({ dkimNextSelector: key.selector, dkimNextPrivateKey: key.privateKey, dkimNextPublicKey: key.publicKey, updatedAt: new Date() });
    if (!started) throw new Conflict('A DKIM key rotation is already waiting for its DNS record; publish it and verify');
    return this.present((await this.row(orgId))!);
  }

  /** The rotation's next record, when published with its key, makes the next key the one that signs; the old one is deleted. */
  private async finishRotation(row: EmailIdentityRow, domain: string, lookup: TxtResolver): Promise<void> {
    if (!row.dkimNextSelector || !row.dkimNextPublicKey) return;
    const published = await lookup(`${row.dkimNextSelector}._domainkey.${domain}`).catch(() => [] as string[][]);
    if (!published.some((chunks) => compact(chunks).includes(`p=${row.dkimNextPublicKey}`))) return;
    await this.deps.knex('email_identities').where({ organizationId: row.organizationId, dkimNextSelector: row.dkimNextSelector }).update({
      dkimSelector: row.dkimNextSelector, dkimPrivateKey: row.dkimNextPrivateKey, dkimPublicKey: row.dkimNextPublicKey,
      dkimNextSelector: null, dkimNextPrivateKey: null, dkimNextPublicKey: null, updatedAt: new Date(),
    });
  }

  /**
   * The organization's DKIM key for mail From `address`, when that is its verified domain; else null (mail from the
   * platform's address is the platform's to sign).
   */
  async dkimFor(orgId: string, address: string | null | undefined): Promise<DkimKey | null> {
    const domain = domainOf(address ?? null);
    if (!domain) return null;
    const row = await this.row(orgId);
    if (!row || !isVerified(row) || row.verifiedDomain !== domain || !row.dkimPrivateKey || !row.dkimSelector) return null;
    try {
      return { domainName: domain, keySelector: row.dkimSelector, privateKey: this.deps.sealer.open<string>(row.dkimPrivateKey) };
    } catch {
      // A key sealed under another ENCRYPTION_KEY cannot sign: the mail still goes, unsigned.
      return null;
    }
  }

  async get(orgId: string): Promise<EmailIdentityView> {
    return this.present(await this.ensure(orgId));
  }

  async put(orgId: string, input: EmailIdentityInput): Promise<EmailIdentityView> {
    await this.ensure(orgId);
    const patch: Record<string, unknown> = { updatedAt: new Date() };
    for (const key of ['fromName', 'fromAddress', 'replyTo', 'signature'] as const) {
      if (input[key] !== undefined) patch[key] = input[key] === null || input[key] === '' ? null : key === 'fromAddress' || key === 'replyTo' ? input[key]!.toLowerCase() : input[key];
    }
    await this.deps.knex('email_identities').where({ organizationId: orgId }).update(patch);
    return this.present((await this.row(orgId))!);
  }

  /**
   * Looks the verification token up in DNS (and a DKIM rotation's next record); a lookup that fails leaves the
   * identity unverified (not an error).
   */
  async verify(orgId: string): Promise<EmailIdentityView> {
    const row = await this.ensure(orgId);
    const domain = domainOf(row.fromAddress);
    let found = false;
    if (domain) {
      const lookup = this.lookupTxt;
      await this.finishRotation(row, domain, lookup);
      // A lookup that fails (no such record, no answer) has not found the token.
      const records = await lookup(`${VERIFICATION_HOST}.${domain}`).catch(() => [] as string[][]);
      found = records.some((chunks) => chunks.join('') === this.tokenValue(row));
    }
    await this.deps.knex('email_identities').where({ organizationId: orgId }).update({
      verifiedDomain: found ? domain : null, domainVerifiedAt: found ? new Date() : null, updatedAt: new Date(),
    });
    return this.present((await this.row(orgId))!);
  }

  /** From and Reply-To for mail sent on the organization's behalf (tickets, channels, AI mail). */
  async senderFor(orgId: string, orgName: string, db?: Knex | Knex.Transaction): Promise<MailSender> {
    return senderOf(orgName, this.deps.mailFrom, await this.row(orgId, db));
  }

  /** The signature appended to the organization's mail (null: none set). */
  async signatureOf(orgId: string, db?: Knex | Knex.Transaction): Promise<string | null> {
    return (await this.row(orgId, db))?.signature ?? null;
  }

  private tokenValue(row: EmailIdentityRow): string {
    return `support-verification=${row.verificationToken}`;
  }

  private present(row: EmailIdentityRow): EmailIdentityView {
    const domain = domainOf(row.fromAddress);
    const platform = domainOf(parseMailbox(this.deps.mailFrom).address) ?? 'localhost';
    const dnsRecords: DnsRecord[] = domain
      ? [
          { type: 'TXT', name: `${VERIFICATION_HOST}.${domain}`, value: this.tokenValue(row), purpose: 'verification' },
          { type: 'TXT', name: domain, value: `v=spf1 include:${platform} ~all`, purpose: 'spf' },
          ...(row.dkimSelector && row.dkimPublicKey ? [{ type: 'TXT' as const, name: `${row.dkimSelector}._domainkey.${domain}`, value: `v=DKIM1; k=rsa; p=${row.dkimPublicKey}`, purpose: 'dkim' as const }] : []),
          ...(row.dkimNextSelector && row.dkimNextPublicKey ? [{ type: 'TXT' as const, name: `${row.dkimNextSelector}._domainkey.${domain}`, value: `v=DKIM1; k=rsa; p=${row.dkimNextPublicKey}`, purpose: 'dkim_next' as const }] : []),
        ]
      : [];
    return {
      fromName: row.fromName, fromAddress: row.fromAddress, replyTo: row.replyTo, signature: row.signature, domain,
      domainVerified: isVerified(row),
      domainVerifiedAt: isVerified(row) ? new Date(row.domainVerifiedAt!).toISOString() : null,
      dnsRecords,
    };
  }
}

/**
 * The one rule for who an organization's mail is from. Verified: its own From and Reply-To. Otherwise MAIL_FROM's
 * address as "<Org> via <platform>", with Reply-To the organization's address when it has one.
 */
export function senderOf(orgName: string, mailFrom: string, identity: Pick<EmailIdentityRow, 'fromName' | 'fromAddress' | 'replyTo' | 'verifiedDomain' | 'domainVerifiedAt'> | undefined): MailSender {
  const platform = parseMailbox(mailFrom);
  const replyTo = identity?.replyTo ?? identity?.fromAddress ?? undefined;
  if (identity && isVerified(identity)) {
    return { from: { name: identity.fromName ?? orgName, address: identity.fromAddress! }, ...(replyTo ? { replyTo } : {}) };
  }
  return { from: { name: platform.name ? `${orgName} via ${platform.name}` : orgName, address: platform.address }, ...(replyTo ? { replyTo } : {}) };
}
