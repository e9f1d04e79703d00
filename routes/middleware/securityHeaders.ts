// Helmet's response headers, worked out once: the policy has no per-request parts (no nonces), so each response
// only copies the same headers instead of running Helmet's middleware chain and rebuilding the CSP string.
import type { IncomingMessage, ServerResponse } from 'node:http';
import helmet, { type HelmetOptions } from 'helmet';

/** A function that gives a response Helmet's headers for `options`. */
export function securityHeaders(options: HelmetOptions): (res: ServerResponse) => void {
  const set: [string, string | number | readonly string[]][] = [];
  const removed: string[] = [];
  const recorder = {
    setHeader: (name: string, value: string | number | readonly string[]) => void set.push([name, value]),
    removeHeader: (name: string) => void removed.push(name),
    getHeader: () => undefined,
  };
  let done = false;
  helmet(options)({ method: 'GET', url: '/', headers: {} } as IncomingMessage, recorder as unknown as ServerResponse, (err?: unknown) => {
    if (err) throw err;
    done = true;
  });
  // Helmet runs its parts synchronously; a version that did not would leave responses without headers.
  if (!done) throw new Error('Helmet did not finish synchronously; its headers cannot be computed once');
  return (res) => {
    for (const name of removed) res.removeHeader(name);
    for (const [name, value] of set) res.setHeader(name, value);
  };
}
