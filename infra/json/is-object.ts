/**
 * A JSON object, as opposed to null, an array or a scalar: what parsed JSON holds where an object is
 * due, from a client (the entries of `tools`, a tool result's blocks) or a provider (`usage`, a choice).
 */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
