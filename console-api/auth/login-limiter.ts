// Throttles on the credential endpoints, counted in Redis in fixed windows started by the first
// attempt. Every attempt counts (the counters are incremented before any password work), so parallel
// guesses cannot slip through.
//
// Login, two counters per attempt, in one MULTI:
//   - per (username, client address): LOGIN_RATE_LIMIT per LOGIN_RATE_WINDOW_SEC; a successful login
//     clears it. Slows guessing one account's password from one place.
//   - per client address, whatever the username: LOGIN_IP_RATE_LIMIT per LOGIN_RATE_WINDOW_SEC; never
//     cleared by a success (else an attacker would log into an account of their own to reset it).
//     Stops password spraying (one common password against many accounts) from one address.
// Registration, per client address: REGISTER_RATE_LIMIT per REGISTER_RATE_WINDOW_SEC.
// OpenID Connect sign-on starts (GET /api/oauth/oidc/start, public, a state row each), per client
// address: LOGIN_IP_RATE_LIMIT per LOGIN_RATE_WINDOW_SEC, a counter of their own (a start is a login
// from that address; it does not use up the password logins' budget). With the states' 10 minutes,
// one address holds at most LOGIN_IP_RATE_LIMIT x 10 unused states.
// Access tokens (GET /api/user/token), per account: ACCESS_TOKEN_ISSUE_LIMIT per
// ACCESS_TOKEN_ISSUE_WINDOW_SEC. Each replaces the account's previous one (auth/sessions.ts).
//
// The client address is request.ip: with TRUSTED_PROXIES set, the one the trusted proxy reports, so
// clients behind one proxy are not locked out together (app.ts). An IPv6 client is counted by its /64
// (clientBucket): one subscriber holds a whole /64, and counted by its full address it could rotate
// addresses for unlimited guesses and registrations. An IPv4 address mapped into IPv6 is the IPv4 one.
// The current password checked on a password change (PUT /api/user/self) counts as a login attempt.
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { RedisKeys } from '../../infra/redis/keys.js';
import type { ConsoleContext } from '../context.js';
import { ConsoleError } from '../http/errors.js';

/** The client a throttle counts: an IPv4 address, or an IPv6 address's /64 prefix. */
export function clientBucket(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (isIP(ip) !== 6) return ip;
  const [head = '', tail = ''] = ip.toLowerCase().split('%')[0]!.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  // An embedded IPv4 tail (::1.2.3.4) takes two groups; it only ever sits in the low 64 bits.
  const rightGroups = right.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const groups = ip.includes('::') ? [...left, ...Array<string>(Math.max(0, 8 - left.length - rightGroups)).fill('0'), ...right] : left;
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** The account name is hashed into the key: Redis never holds login names in clear. */
export function loginAttemptsKey(keys: RedisKeys, username: string, ip: string): string {
  const who = createHash('sha256').update(username.toLowerCase(), 'utf8').digest('hex').slice(0, 32);
  return keys.loginAttempts(who, clientBucket(ip));
}

interface Counted {
  count: number;
  ttl: number;
}

/** Counts one hit on each key (each expiring `windowSec` after its first hit). */
async function countHits(ctx: ConsoleContext, keys: string[], windowSec: number): Promise<Counted[]> {
  const tx = ctx.redis.multi();
  for (const key of keys) tx.set(key, 0, 'EX', windowSec, 'NX').incr(key).ttl(key);
  const res = (await tx.exec()) ?? [];
  return keys.map((_k, i) => ({
    count: Number(res[i * 3 + 1]?.[1] ?? 0),
    ttl: Math.max(Number(res[i * 3 + 2]?.[1] ?? windowSec), 1),
  }));
}

/** Counts this login attempt; throws RATE_LIMITED (with Retry-After) when it is over either limit. */
export async function countLoginAttempt(ctx: ConsoleContext, username: string, ip: string): Promise<void> {
  const { LOGIN_RATE_LIMIT, LOGIN_IP_RATE_LIMIT, LOGIN_RATE_WINDOW_SEC } = ctx.settings;
  const [account, address] = await countHits(ctx, [loginAttemptsKey(ctx.keys, username, ip), ctx.keys.loginAttemptsFromAddress(clientBucket(ip))], LOGIN_RATE_WINDOW_SEC);
  if (address!.count > LOGIN_IP_RATE_LIMIT) {
    throw new ConsoleError('RATE_LIMITED', `too many login attempts from this address; retry in ${address!.ttl} s`, { retryAfterSec: address!.ttl });
  }
  if (account!.count > LOGIN_RATE_LIMIT) {
    throw new ConsoleError('RATE_LIMITED', `too many login attempts for this account from this address; retry in ${account!.ttl} s`, {
      retryAfterSec: account!.ttl,
    });
  }
}

/** After a successful login: that account's counter for this address starts again (the address's does not). */
export async function clearLoginAttempts(ctx: ConsoleContext, username: string, ip: string): Promise<void> {
  await ctx.redis.del(loginAttemptsKey(ctx.keys, username, ip));
}

/**
 * The signed-in account's current password, given to change a credential (its password, the address
 * that resets it): a guess is a login attempt (countLoginAttempt), so a stolen session cannot guess it
 * at full speed. Throws INVALID_CREDENTIALS naming original_password when it is wrong.
 */
export async function verifyCurrentPassword(ctx: ConsoleContext, user: { username: string; password_hash: string }, password: string, ip: string): Promise<void> {
  await countLoginAttempt(ctx, user.username, ip);
  if (!(await ctx.passwords.verify(password, user.password_hash))) {
    throw new ConsoleError('INVALID_CREDENTIALS', 'original_password: the current password is incorrect');
  }
  await clearLoginAttempts(ctx, user.username, ip);
}

/** Counts this registration; throws RATE_LIMITED (with Retry-After) when the address is over the limit. */
export async function countRegistration(ctx: ConsoleContext, ip: string): Promise<void> {
  const [hit] = await countHits(ctx, [ctx.keys.registrationsFromAddress(clientBucket(ip))], ctx.settings.REGISTER_RATE_WINDOW_SEC);
  if (hit!.count > ctx.settings.REGISTER_RATE_LIMIT) {
    throw new ConsoleError('RATE_LIMITED', `too many registrations from this address; retry in ${hit!.ttl} s`, { retryAfterSec: hit!.ttl });
  }
}

/** Counts this sign-on start; throws RATE_LIMITED (with Retry-After) when the address is over LOGIN_IP_RATE_LIMIT. */
export async function countOidcStart(ctx: ConsoleContext, ip: string): Promise<void> {
  const { LOGIN_IP_RATE_LIMIT, LOGIN_RATE_WINDOW_SEC } = ctx.settings;
  const [hit] = await countHits(ctx, [ctx.keys.oidcStartsFromAddress(clientBucket(ip))], LOGIN_RATE_WINDOW_SEC);
  if (hit!.count > LOGIN_IP_RATE_LIMIT) {
    throw new ConsoleError('RATE_LIMITED', `too many sign-on starts from this address; retry in ${hit!.ttl} s`, { retryAfterSec: hit!.ttl });
  }
}

/**
 * Access tokens one account may be issued per window. Each issue is a transaction under the account's
 * row lock and replaces the previous token: far above a person's pace (new-api's "regenerate" button),
 * a bound on a script calling it in a loop.
 */
export const ACCESS_TOKEN_ISSUE_LIMIT = 10;
export const ACCESS_TOKEN_ISSUE_WINDOW_SEC = 60;

/** Counts this access-token issue; throws RATE_LIMITED (with Retry-After) past ACCESS_TOKEN_ISSUE_LIMIT. */
export async function countAccessTokenIssue(ctx: ConsoleContext, userId: number): Promise<void> {
  const [hit] = await countHits(ctx, [ctx.keys.accessTokenIssues(userId)], ACCESS_TOKEN_ISSUE_WINDOW_SEC);
  if (hit!.count > ACCESS_TOKEN_ISSUE_LIMIT) {
    throw new ConsoleError('RATE_LIMITED', `too many access tokens issued for this account; retry in ${hit!.ttl} s`, { retryAfterSec: hit!.ttl });
  }
}
