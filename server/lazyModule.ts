// Libraries of optional parts (S3 storage, SMTP in and out, inbound MIME mail, DOCX and HTML documents) are loaded
// the first time that part is used, not when the server starts. Together they were about 40% of an idle server's
// heap: memory every deployment paid for, and objects every full garbage collection marked again, in the middle of
// live chat traffic, on servers that never use some of them.
import { createRequire } from 'node:module';

const load = createRequire(import.meta.url);

/** The CommonJS build of `id`, required on the first call (synchronous, so constructors may use it). */
export function lazyModule<T>(id: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= load(id) as T);
}
