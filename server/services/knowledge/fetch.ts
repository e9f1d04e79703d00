// Fetching web pages for URL sources without reaching inside our network: every host is resolved first, every
// address must be public, and the connection goes to the address that was checked (no second lookup to rebind).
import http from 'node:http';
import https from 'node:https';
import { addressesOf, isPublicAddress, pinnedLookup, type HostAddress } from '../../addresses.js';
import { ValidationFailed } from '../../errors.js';

export const MAX_PAGE_BYTES = 5 * 1024 * 1024;
export const MAX_PAGES = 100;
/** The most one page may take, from the connection to its last byte, unless the server is configured otherwise. */
export const PAGE_TIMEOUT_MS = 15_000;
const MAX_REDIRECTS = 5;

export class UnsafeUrl extends ValidationFailed {
  constructor(reason: string) {
    super(`This URL cannot be fetched: ${reason}`, [{ field: 'url', message: reason }]);
  }
}

/** Checks the URL's form and resolves its host; every address must be public. Returns the address to connect to. */
export async function resolvePublic(raw: string, opts: { allowPrivate?: boolean } = {}): Promise<{ url: URL } & HostAddress> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeUrl('not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UnsafeUrl('only http and https are fetched');
  if (url.username || url.password) throw new UnsafeUrl('credentials in URLs are not allowed');
  const addresses = await addressesOf(url);
  if (addresses.length === 0) throw new UnsafeUrl('the host does not resolve');
  if (!opts.allowPrivate && addresses.some((a) => !isPublicAddress(a.address))) throw new UnsafeUrl('the host is not a public address');
  return { url, ...addresses[0]! };
}

export interface FetchedPage {
  url: string;
  contentType: string;
  body: Buffer;
}

/**
 * GET one page through the checked address, at most 5 MiB, following redirects (each checked again). The page has
 * `timeoutMs` in all, redirects included, not per read: a server sending a byte now and then, or a chain of slow
 * redirects, cannot hold an indexing worker longer than that.
 */
export async function fetchPage(raw: string, opts: { allowPrivate?: boolean; maxBytes?: number; timeoutMs?: number } = {}): Promise<FetchedPage> {
  const timeoutMs = opts.timeoutMs ?? PAGE_TIMEOUT_MS;
  const deadline = AbortSignal.timeout(timeoutMs);
  const tooLong = (err: unknown) => (deadline.aborted ? new Error(`the page took longer than ${timeoutMs} ms`) : err);
  let current = raw;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const { url, address, family } = await resolvePublic(current, opts);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).get(url, { lookup: pinnedLookup(address, family), signal: deadline, headers: { 'user-agent': 'SupportPlatformKnowledgeBot/1.0', accept: 'text/html,text/plain,application/pdf;q=0.9,*/*;q=0.5' } }, resolve);
      req.on('error', (err) => reject(tooLong(err)));
    });
    const status = res.statusCode ?? 0;
    if (status >= 300 && status < 400 && res.headers.location) {
      res.resume();
      current = new URL(res.headers.location, url).toString();
      continue;
    }
    if (status < 200 || status >= 300) {
      res.resume();
      throw new Error(`the page answered ${status}`);
    }
    const limit = opts.maxBytes ?? MAX_PAGE_BYTES;
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > limit) {
          res.destroy();
          throw new UnsafeUrl(`the page is larger than ${limit} bytes`);
        }
        chunks.push(chunk);
      }
    } catch (err) {
      throw tooLong(err);
    }
    return { url: url.toString(), contentType: String(res.headers['content-type'] ?? 'text/html'), body: Buffer.concat(chunks) };
  }
  throw new Error('too many redirects');
}

/** Links of an HTML page on the same host, absolute, without fragments. */
export function sameHostLinks(html: string, base: URL): string[] {
  const out = new Set<string>();
  for (const m of html.matchAll(/<a\s[^>]*?href\s*=\s*["']([^"'#]+)/gi)) {
    try {
      const u = new URL(m[1]!, base);
      if ((u.protocol === 'http:' || u.protocol === 'https:') && u.host === base.host) {
        u.hash = '';
        out.add(u.toString());
      }
    } catch {
      // not a URL: skipped
    }
  }
  return [...out];
}
