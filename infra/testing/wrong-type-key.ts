// For tests of what a Redis script does when a key holds the wrong type (a corrupted or hand-edited
// key): the key made a string for the length of one test, then given back what it held.
import type { Redis } from 'ioredis';

/** Runs `fn` while `key` holds a string, then restores the key (or its absence). */
export async function withWrongTypeKey<T>(redis: Redis, key: string, fn: () => Promise<T>): Promise<T> {
  const aside = `${key}:aside`;
  const had = (await redis.exists(key)) === 1;
  if (had) await redis.rename(key, aside);
  await redis.set(key, 'not of its type');
  try {
    return await fn();
  } finally {
    await redis.del(key);
    if (had) await redis.rename(aside, key);
  }
}
