// One way to build ajv instances and to turn ajv errors into the contract's error details (REST, sockets, ingest).
import { Ajv, type ErrorObject, type FuncKeywordDefinition, type Options, type SchemaValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { ErrorDetail } from './errors.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A UUID in its text form, any case: what may be bound to a uuid column without a cast error. */
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

/**
 * Whether a parsed JSON value nests objects and arrays more than `maxDepth` levels (the value itself is level 1).
 * Walked with an explicit stack: the point is to refuse input too deep for recursive code, so this must not recurse.
 */
export function exceedsDepth(value: unknown, maxDepth: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [node, depth] = next;
    if (node === null || typeof node !== 'object') continue;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** Whether the JSON text of a parsed value is over `maxBytes` UTF-8 bytes; iterative, and stops once over. */
export function exceedsBytes(value: unknown, maxBytes: number): boolean {
  const text = (s: string) => Buffer.byteLength(JSON.stringify(s));
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'string') bytes += text(node);
    else if (typeof node === 'number' || typeof node === 'boolean' || node === null) bytes += String(node).length;
    else if (Array.isArray(node)) {
      bytes += 2 + Math.max(0, node.length - 1);
      for (const child of node) stack.push(child);
    } else if (typeof node === 'object') {
      const entries = Object.entries(node);
      bytes += 2 + Math.max(0, entries.length - 1);
      for (const [key, child] of entries) {
        bytes += text(key) + 1;
        stack.push(child);
      }
    }
    if (bytes > maxBytes) return true;
  }
  return false;
}

/** An ajv keyword (`x-max-depth`, `x-max-bytes`) that checks a free-form object or array with one of the above. */
function limitKeyword(keyword: string, exceeds: (value: unknown, limit: number) => boolean, message: (limit: number) => string): FuncKeywordDefinition {
  const validate: SchemaValidateFunction = (limit: number, data: unknown) => {
    if (!exceeds(data, limit)) return true;
    validate.errors = [{ keyword, message: message(limit), params: { limit } }];
    return false;
  };
  return { keyword, type: ['object', 'array'], schemaType: 'number', metaSchema: { type: 'integer', minimum: 1 }, errors: true, validate };
}

/** Strict ajv with the standard formats (email, uuid, date-time, uri, ...) and the free-form limits. */
export function createAjv(options: Options = {}): Ajv {
  const ajv = addFormats(new Ajv({ allErrors: true, strict: true, ...options }));
  ajv.addKeyword(limitKeyword('x-max-depth', exceedsDepth, (n) => `must not be nested more than ${n} levels deep`));
  ajv.addKeyword(limitKeyword('x-max-bytes', exceedsBytes, (n) => `must not be larger than ${n} bytes as JSON`));
  return ajv;
}

/** `{ field, message }` per ajv error; `field` is a dotted path, or `where` when the whole input is at fault. */
export function errorDetails(errors: ErrorObject[] | null | undefined, where: string): ErrorDetail[] {
  return (errors ?? []).map((e) => {
    const base = e.instancePath ? e.instancePath.slice(1).replace(/\//g, '.') : '';
    const params = e.params as Record<string, string | undefined>;
    const field = [base, params.missingProperty ?? params.additionalProperty].filter(Boolean).join('.') || where;
    const message = e.keyword === 'additionalProperties' ? 'is not an allowed field' : (e.message ?? 'is invalid');
    return { field, message, in: where };
  });
}
