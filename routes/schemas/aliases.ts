// Names kept for compatibility: where two routes once named one idea differently, both names are accepted and the
// OpenAPI document marks the old one deprecated, naming the one to use.
import { ValidationFailed } from '../../server/errors.js';
import type { JsonSchema } from '../registry.js';

/** The schema of an old name: the current one's, marked deprecated. */
export function aliasOf(current: string, schema: JsonSchema): JsonSchema {
  const { description: _ignored, ...rest } = schema;
  return { ...rest, deprecated: true, description: `Same as \`${current}\` (the name used across the API); kept for compatibility` };
}

/**
 * The value given under the current name or its old one. Both with different values is 400 naming the old one;
 * `required` makes neither 400 naming the current one.
 */
export function unalias<T>(body: Record<string, unknown>, current: string, old: string, opts: { required?: boolean } = {}): T | undefined {
  const now = body[current];
  const before = body[old];
  if (now !== undefined && before !== undefined && JSON.stringify(now) !== JSON.stringify(before)) {
    throw new ValidationFailed(`Give ${current} or its old name ${old}, not both`, [{ field: old, message: `is the old name of ${current}; give one of them`, in: 'body' }]);
  }
  const value = (now !== undefined ? now : before) as T | undefined;
  if (value === undefined && opts.required) throw new ValidationFailed('The request body is not valid', [{ field: current, message: `must have required property '${current}'`, in: 'body' }]);
  return value;
}
