// A small HTTP client for tests: JSON in and out, bearer tokens, and a per-client source IP (X-Forwarded-For).
import { randomInt } from 'node:crypto';

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export interface RequestOptions {
  body?: unknown;
  /** Sent as is (for malformed JSON and content-type tests). */
  rawBody?: string | Buffer;
  token?: string | null;
  headers?: Record<string, string>;
}

export function randomIp(): string {
  return `10.${randomInt(0, 256)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

export class Api {
  /** Each client looks like its own visitor to the per-IP rate limits. */
  constructor(
    readonly baseUrl: string,
    public ip: string = randomIp(),
  ) {}

  async request<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { 'x-forwarded-for': this.ip, ...(opts.headers ?? {}) };
    let body: string | Buffer | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    // A Buffer is a valid fetch body; TypeScript's lib types disagree on its ArrayBuffer kind.
    const res = await fetch(`${this.baseUrl}/api/v1${path}`, { method, headers, body: body as BodyInit | undefined });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  get<T = any>(path: string, opts?: RequestOptions) {
    return this.request<T>('GET', path, opts);
  }
  post<T = any>(path: string, body?: unknown, opts: RequestOptions = {}) {
    return this.request<T>('POST', path, { ...opts, body });
  }
  put<T = any>(path: string, body?: unknown, opts: RequestOptions = {}) {
    return this.request<T>('PUT', path, { ...opts, body });
  }
  patch<T = any>(path: string, body?: unknown, opts: RequestOptions = {}) {
    return this.request<T>('PATCH', path, { ...opts, body });
  }
  delete<T = any>(path: string, opts: RequestOptions = {}) {
    return this.request<T>('DELETE', path, opts);
  }
}
