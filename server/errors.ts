// Typed errors with a stable code; mapped to HTTP and socket acks in one place each (toAppError).
import dbErrors from 'db-errors';
import objection from 'objection';

const { ValidationError, NotFoundError } = objection;
const { wrapError, UniqueViolationError, ForeignKeyViolationError, NotNullViolationError, CheckViolationError, DataError, DBError } = dbErrors;

export interface ErrorDetail {
  field?: string;
  message: string;
  [key: string]: unknown;
}

export class AppError extends Error {
  readonly status: number = 500;
  readonly code: string = 'internal_error';
  headers: Record<string, string> = {};
  constructor(message: string, readonly details: ErrorDetail[] = []) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationFailed extends AppError {
  override readonly status = 400;
  override readonly code = 'validation_failed';
  constructor(message = 'The request is not valid', details: ErrorDetail[] = []) {
    super(message, details);
  }
}
export class InvalidJson extends AppError {
  override readonly status = 400;
  override readonly code = 'invalid_json';
  constructor(message = 'The request body is not valid JSON') {
    super(message);
  }
}
export class InvalidOtp extends AppError {
  override readonly status = 400;
  override readonly code = 'invalid_otp';
  constructor(message = 'The code is invalid or has expired') {
    super(message);
  }
}
export class InvalidTransition extends AppError {
  override readonly status = 400;
  override readonly code = 'invalid_transition';
}
export class Unauthorized extends AppError {
  override readonly status = 401;
  override readonly code = 'unauthorized';
  constructor(message = 'Authentication is required') {
    super(message);
  }
}
export class Forbidden extends AppError {
  override readonly status = 403;
  override readonly code = 'forbidden';
  constructor(message = 'You do not have permission to do this') {
    super(message);
  }
}
export class PlanLimitReached extends AppError {
  override readonly status = 403;
  override readonly code = 'plan_limit_reached';
}
export class NotFound extends AppError {
  override readonly status = 404;
  override readonly code = 'not_found';
  constructor(what = 'Resource') {
    super(`${what} not found`);
  }
}
/** A path the API has, asked with a method it lacks; `Allow` names the methods it has. */
export class MethodNotAllowed extends AppError {
  override readonly status = 405;
  override readonly code = 'method_not_allowed';
  constructor(allowed: string[]) {
    super(`This path answers ${allowed.join(', ')} only`);
    this.headers.Allow = allowed.join(', ');
  }
}
export class Conflict extends AppError {
  override readonly status = 409;
  override readonly code = 'conflict';
}
export class Gone extends AppError {
  override readonly status = 410;
  override readonly code = 'gone';
}
export class PayloadTooLarge extends AppError {
  override readonly status = 413;
  override readonly code = 'payload_too_large';
  constructor(message = 'The request body is too large') {
    super(message);
  }
}
export class UnsupportedMediaType extends AppError {
  override readonly status = 415;
  override readonly code = 'unsupported_media_type';
  constructor(message = 'Content-Type must be application/json') {
    super(message);
  }
}
export class RateLimited extends AppError {
  override readonly status = 429;
  override readonly code = 'rate_limited';
  constructor(retryAfterSeconds: number) {
    super('Too many requests, try again later');
    this.headers['Retry-After'] = String(Math.max(1, Math.ceil(retryAfterSeconds)));
  }
}
export class ServiceUnavailable extends AppError {
  override readonly status = 503;
  override readonly code = 'service_unavailable';
}
export class InternalError extends AppError {
  override readonly status = 500;
  override readonly code = 'internal_error';
  constructor() {
    super('Something went wrong on our side');
  }
}

/** Body-parser errors carry a stable `type` (raw-body / co-body); JSON syntax errors are SyntaxError. */
function fromBodyParser(err: { type?: unknown; status?: unknown; code?: unknown }): AppError | null {
  switch (err.type) {
    case 'entity.too.large':
      return new PayloadTooLarge();
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new UnsupportedMediaType('Unsupported body encoding');
    case 'request.size.invalid':
    case 'request.aborted':
      return new ValidationFailed('The request body was incomplete');
    default:
      break;
  }
  // A Content-Encoding the parser does not know (inflation sets only status 415), or a body that does not
  // decompress (zlib and brotli errors carry stable Z_* / ERR__ERROR_* codes): the client's fault, not ours.
  if (err.status === 415) return new UnsupportedMediaType('Unsupported Content-Encoding');
  if (typeof err.code === 'string' && /^(Z_|ERR_ZLIB|ERR_BROTLI|ERR__ERROR_)/.test(err.code)) return new InvalidJson('The request body could not be decompressed');
  return null;
}

/**
 * A stack overflow: V8 gives it no class or code of its own, so its message is the only mark. Schemas bound the
 * depth of every free-form field; should input still reach recursive code too deep, it is the input's fault.
 */
function isStackOverflow(err: unknown): boolean {
  return err instanceof RangeError && err.message.includes('Maximum call stack size exceeded');
}

/** Connection-level socket errors: the database (or the path to it) is away, not the request at fault. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND']);

/**
 * The database is unreachable or cut the connection: SQLSTATE class 08 (connection exception) or 57 (operator
 * intervention: shutdown, terminated backend), a socket error, or no pooled connection within knex's timeout.
 * The client may retry, so it is 503, not 500.
 */
function isDatabaseUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && (/^(08|57P0)/.test(code) || UNREACHABLE.has(code))) return true;
  // node-postgres reports a socket that closed under a query with this text and no code at all (knex prefixes the
  // SQL), so here, and only here, the message is the mark.
  if (code === undefined && /Connection terminated( unexpectedly)?$/.test(err.message)) return true;
  return err.name === 'KnexTimeoutError';
}

/**
 * Maps anything thrown to an AppError. Database errors map by class (via Objection's db-errors),
 * never by message text; anything unknown becomes an opaque 500.
 */
export function toAppError(thrown: unknown): AppError {
  if (thrown instanceof AppError) return thrown;
  if (isStackOverflow(thrown)) return new ValidationFailed('The input is nested too deeply');
  if (isDatabaseUnavailable(thrown) || isDatabaseUnavailable((thrown as { nativeError?: unknown } | null)?.nativeError)) {
    return new ServiceUnavailable('The database is not answering; try again shortly');
  }
  // Queries made through knex directly are not wrapped by Objection; wrapping twice is harmless.
  const err = thrown instanceof Error ? wrapError(thrown) : thrown;
  if (err instanceof SyntaxError) return new InvalidJson();
  if (err instanceof UniqueViolationError) return new Conflict('A record with these values already exists');
  if (err instanceof ForeignKeyViolationError) return new Conflict('A related record is missing or still in use');
  if (err instanceof NotNullViolationError || err instanceof CheckViolationError || err instanceof DataError) {
    return new ValidationFailed('The values given are not valid');
  }
  if (err instanceof ValidationError) return new ValidationFailed('The values given are not valid');
  if (err instanceof NotFoundError) return new NotFound();
  if (err instanceof DBError) return new InternalError();
  if (err && typeof err === 'object') {
    const parsed = fromBodyParser(err as { type?: unknown; status?: unknown; code?: unknown });
    if (parsed) return parsed;
  }
  return new InternalError();
}
