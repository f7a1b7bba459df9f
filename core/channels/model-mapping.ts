// The model name a channel is sent for a requested one, from the channel's model_mapping as stored
// (JSON text), for the console's channel test and prober; the relay parses each channel's mapping
// once per reload (relay/routing/channel-registry.ts parseMapping) to the same effect.

/**
 * `requested`'s model_mapping entry when the mapping is a JSON object naming it with a non-empty
 * string, else `requested` itself (an unreadable mapping included, as the relay sends it). Own keys
 * only: a model named "constructor", "toString" or "__proto__" must not find Object's own members.
 */
export function mappedModel(rawMapping: string, requested: string): string {
  if (!rawMapping) return requested;
  try {
    const mapping: unknown = JSON.parse(rawMapping);
    if (!mapping || typeof mapping !== 'object' || !Object.hasOwn(mapping, requested)) return requested;
    const mapped = (mapping as Record<string, unknown>)[requested];
    return typeof mapped === 'string' && mapped ? mapped : requested;
  } catch {
    return requested;
  }
}
