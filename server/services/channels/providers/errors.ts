// How a provider call failed, as the outbound worker needs to know: try again (when), or stop (and why).
export class ProviderError extends Error {
  constructor(
    message: string,
    /** Timeouts, 429 and 5xx: worth another attempt. */
    readonly retryable: boolean,
    /** Seconds the provider asked us to wait (Retry-After). */
    readonly retryAfterSeconds?: number,
    /** The final status this failure means for the delivery. */
    readonly finalStatus: 'failed' | 'outside_window' = 'failed',
    /** The provider refused the channel's credentials (401/403, SMTP authentication): the channel itself is broken. */
    readonly credentialsRefused = false,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/** Provider calls time out rather than hold a worker. */
export const PROVIDER_TIMEOUT_MS = 15_000;

/** A JSON POST whose network failures, timeouts, 429 and 5xx come back as retryable ProviderErrors. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown>; retryAfter: number | undefined }> {
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
  } catch (err) {
    throw new ProviderError(`request failed: ${err instanceof Error ? err.name : 'error'}`, true);
  }
  const text = await res.text().catch(() => '');
  let json: Record<string, unknown> = {};
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    json = {};
  }
  const header = res.headers.get('retry-after');
  const retryAfter = header && /^\d+$/.test(header) ? Number(header) : header && !Number.isNaN(Date.parse(header)) ? Math.max(0, Math.ceil((Date.parse(header) - Date.now()) / 1000)) : undefined;
  return { status: res.status, json, retryAfter };
}

/** The common reading of an HTTP status: 2xx fine, 429/5xx retry, other 4xx final. */
export function failureOf(status: number, description: string, retryAfter: number | undefined): ProviderError | null {
  if (status >= 200 && status < 300) return null;
  if (status === 429 || status >= 500) return new ProviderError(`HTTP ${status}: ${description}`.slice(0, 300), true, retryAfter);
  return new ProviderError(`HTTP ${status}: ${description}`.slice(0, 300), false, undefined, 'failed', status === 401 || status === 403);
}

/**
 * A file's bytes, refused past `maxBytes` (announced or actual) without reading further. Its failures are plain
 * errors: a file that cannot be fetched becomes a note on its message, never a retry, so there is nothing to classify.
 */
export async function download(url: string, headers: Record<string, string>, maxBytes: number): Promise<Buffer> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
  if (!res.ok || !res.body) throw new Error(`the file download answered ${res.status}`);
  if (Number(res.headers.get('content-length') ?? 0) > maxBytes) {
    await res.body.cancel();
    throw new Error(`the file is larger than ${maxBytes} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > maxBytes) throw new Error(`the file is larger than ${maxBytes} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}
