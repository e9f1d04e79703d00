// Wraps a socket event handler: validates the payload (ajv, compiled once), answers the ack, maps errors in one place.
import type { ValidateFunction } from 'ajv';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { Socket } from 'socket.io';
import { toAppError, ValidationFailed } from '../server/errors.js';
import type { Logger } from '../server/logger.js';
import { createAjv, errorDetails } from '../server/validation.js';

const ajv = createAjv({ coerceTypes: false });
const compiled = new Map<object, ValidateFunction>();

/** Compiles each schema object once per process; pass module-level constants, never literals made per socket. */
export function validator(schema: object): ValidateFunction {
  let v = compiled.get(schema);
  if (!v) {
    v = ajv.compile(schema);
    compiled.set(schema, v);
  }
  return v;
}

/** What a payload holds once `S` accepted it (deferred, so that TypeScript infers S from the schema alone). */
type Payload<S> = S extends JSONSchema ? FromSchema<S> : never;
type Handler<P> = (payload: P) => Promise<unknown>;

/** Registers `event` on the socket; the handler receives the payload typed by `schema`, which validated it. A missing ack callback is tolerated (fire-and-forget clients). */
export function on<const S extends Exclude<JSONSchema, boolean>>(socket: Socket, logger: Logger, event: string, schema: S, handler: Handler<Payload<S>>): void {
  const validate = validator(schema);
  socket.on(event, async (payload: unknown, ack?: unknown) => {
    const reply = typeof ack === 'function' ? (ack as (r: unknown) => void) : () => undefined;
    try {
      if (!validate(payload)) {
        throw new ValidationFailed('The event payload is not valid', errorDetails(validate.errors, 'payload'));
      }
      // ajv accepted it, so it is what the schema describes.
      const data = await handler(payload as never);
      reply({ success: true, data: data ?? {} });
    } catch (thrown) {
      const err = toAppError(thrown);
      if (err.status >= 500) logger.error({ err: thrown, event }, 'socket event failed');
      // The same details as a REST error body: a validation error names each field at fault (`field`, `message`, `in`).
      reply({ success: false, error: { code: err.code, message: err.message, details: err.details } });
    }
  });
}
