// The relay's request-body schemas, compiled (infra/schema/compiled-schema.ts): a valid body is
// checked where it lies, not copied, and an invalid one answered with its first problem.
import type { z } from 'zod';
import { compileSchema } from '../infra/schema/compiled-schema.js';
import { RelayError } from './errors.js';

/**
 * A compiled body schema: the body itself when it is valid (unchanged, not copied), else the 400 that
 * answers it (`invalid_request`, its first problem in Anthropic's wording, e.g. `messages.0.role: must
 * be one of 'user', 'assistant'`; rendered in the route's protocol as every RelayError is).
 */
export type EdgeSchema<T> = (json: unknown) => T | RelayError;

export function compileEdgeSchema<S extends z.ZodType>(schema: S): EdgeSchema<z.infer<S>> {
  const check = compileSchema(schema);
  return (json) => {
    const problem = check(json);
    return problem === null ? json as z.infer<S> : new RelayError('invalid_request', problem);
  };
}
