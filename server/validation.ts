// One way to build ajv instances and to turn ajv errors into the contract's error details (REST, sockets, ingest).
import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { ErrorDetail } from './errors.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A UUID in its text form, any case: what may be bound to a uuid column without a cast error. */
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

/** Strict ajv with the standard formats (email, uuid, date-time, uri, ...). */
export function createAjv(options: Options = {}): Ajv {
  return addFormats(new Ajv({ allErrors: true, strict: true, ...options }));
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
