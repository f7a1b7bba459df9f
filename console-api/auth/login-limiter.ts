// Login attempts per (username, client address): at most LOGIN_RATE_LIMIT in each window of
// LOGIN_RATE_WINDOW_SEC (fixed window started by the first attempt); the next ones answer 429 with
// Retry-After until the window ends. A successful login clears the counter. Every attempt counts
// (it is incremented before the password is checked), so parallel guesses cannot slip through.
//
// Key: `<REDIS_PREFIX>:console:login:<sha256(lower-case username), 32 hex>:<client address>`.
// (To be moved into infra/redis/keys.ts as `loginAttempts(username, ip)`.)
import type { RedisKeys } from '../../infra/redis/keys.js';
import { createHash } from 'node:crypto';
import type { ConsoleContext } from '../context.js';

/** The account name is hashed into the key: Redis never holds login names in clear. */
export function loginAttemptsKey(keys: RedisKeys, username: string, ip: string): string {
  const who = createHash('sha256').update(username.toLowerCase(), 'utf8').digest('hex').slice(0, 32);
  return keys.loginAttempts(who, ip);
}

/** Counts this attempt; returns the seconds to wait when it is over the limit, else 0. */
export async function countLoginAttempt(ctx: ConsoleContext, username: string, ip: string): Promise<number> {
  const key = loginAttemptsKey(ctx.keys, username, ip);
  const window = ctx.settings.LOGIN_RATE_WINDOW_SEC;
  const res = await ctx.redis.multi().set(key, 0, 'EX', window, 'NX').incr(key).ttl(key).exec();
  const attempts = Number(res?.[1]?.[1] ?? 0);
  const ttl = Number(res?.[2]?.[1] ?? window);
  return attempts > ctx.settings.LOGIN_RATE_LIMIT ? Math.max(ttl, 1) : 0;
}

export async function clearLoginAttempts(ctx: ConsoleContext, username: string, ip: string): Promise<void> {
  await ctx.redis.del(loginAttemptsKey(ctx.keys, username, ip));
}
