// How the micro-benchmarks (stream-cost.ts, conversion-cost.ts) hand a provider's stream to what they
// measure: as the network would deliver it.

/** Chunks as a provider sends them: one event per chunk (token by token), or coalesced into 16 KiB reads. */
export function chunked(evs: Buffer[], coalesce: boolean): Buffer[] {
  if (!coalesce) return evs;
  const all = Buffer.concat(evs);
  const out: Buffer[] = [];
  for (let i = 0; i < all.length; i += 16 * 1024) out.push(all.subarray(i, i + 16 * 1024));
  return out;
}
