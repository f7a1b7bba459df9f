// Cache affinity: requests of one API key (or of one end user, metadata.user_id, where the client
// names them) keep going to the same channel of a priority tier while it is healthy, so the
// provider's prompt cache, which lives per credential, keeps hitting.
//
// Weighted rendezvous hashing (highest random weight): each candidate channel gets the score
// weight / -ln(u), u a uniform draw in (0,1) derived from hash(affinity key, channel); the highest
// score wins. Over many keys a channel wins in proportion to its weight, as the weighted draw did;
// for one key the answer is the same every time. When a channel leaves the tier (disabled, or tried
// and excluded on a retry) only the keys that it won move, each to its own second choice, and a
// channel joining takes from every other channel only its share. Picking costs one 32-bit mix and
// one logarithm per candidate of the tier, no allocation.

/** 32-bit finalizer of MurmurHash3: every input bit affects every output bit. */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** FNV-1a of a string's UTF-16 code units, then mixed. */
function hashString(s: string, h: number): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return mix32(h);
}

/**
 * The affinity key of a request as a 32-bit number: the API key (its id), and the end user when the
 * request names one, so one key serving many users spreads them while each user stays put.
 */
export function affinityOf(tokenId: number, endUser: string | undefined): number {
  const base = mix32(Math.imul(tokenId | 0, 0x9e3779b1) ^ 0x5bd1e995);
  return endUser ? hashString(endUser, base) : base;
}

/** A channel's own seed for rendezvous hashing, computed once when the routes are loaded. */
export function channelSeed(channelId: number): number {
  return mix32(Math.imul(channelId | 0, 0x27d4eb2f) ^ 0x165667b1);
}

const TWO_POW_32 = 4294967296;

/** The rendezvous score of (affinity, channel) for a channel of this weight; higher wins. */
export function rendezvousScore(affinity: number, seed: number, weight: number): number {
  // In (0, 1): never 0 (log would be -Infinity) nor 1 (the score would be Infinity).
  const u = (mix32(affinity ^ seed) + 0.5) / TWO_POW_32;
  return weight / -Math.log(u);
}

/** The end user a Messages request names (metadata.user_id), if it is a non-empty string. */
export function endUserOf(body: object): string | undefined {
  const meta = (body as { metadata?: unknown }).metadata;
  if (meta === null || typeof meta !== 'object') return undefined;
  const user = (meta as { user_id?: unknown }).user_id;
  return typeof user === 'string' && user.length > 0 ? user : undefined;
}
