// A script defined while a command of the same loop turn waits in an auto-pipeline: before
// defineRedisCommand, its call failed and the batch's reply threw an uncaught TypeError (redis/ioredis
// #1931) that ended the process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig } from '../testing/test-config.js';
import { createRedis, type Redis } from './client.js';
import { defineRedisCommand } from './define-command.js';

type ScriptCall = (...args: (string | number)[]) => Promise<unknown>;
let redis: Redis;
const uncaught: unknown[] = [];
const onUncaught = (err: unknown): void => { uncaught.push(err); };

beforeAll(async () => {
  // As the services make theirs: auto-pipelined, a Redis Cluster client where the tests run on one.
  redis = createRedis(testConfig(), 'define-command-test');
  await redis.ping();
  process.on('uncaughtException', onUncaught);
});
afterAll(async () => {
  process.off('uncaughtException', onUncaught);
  await redis.quit();
});

describe('defineRedisCommand', () => {
  it('a script defined in the turn another command is waiting to be sent runs, and the batch answers both', async () => {
    const waiting = redis.echo('sent first');
    defineRedisCommand(redis, 'defineCommandLate:1', { numberOfKeys: 1, lua: 'return {KEYS[1], ARGV[1]}' });
    const late = (redis as unknown as Record<string, ScriptCall>)['defineCommandLate:1']!('a-key', 'an-arg');
    expect(await waiting).toBe('sent first');
    expect(await late).toEqual(['a-key', 'an-arg']);
    // The reply's callbacks run on process.nextTick: let them.
    await new Promise((done) => setTimeout(done, 20));
    expect(uncaught).toEqual([]);
  });

  it('a script without a key count takes it as its first argument; defining a name twice keeps the first', async () => {
    defineRedisCommand(redis, 'defineCommandCounted', { lua: 'return #KEYS' });
    defineRedisCommand(redis, 'defineCommandCounted', { lua: 'return -1' });
    expect(await (redis as unknown as Record<string, ScriptCall>)['defineCommandCounted']!(2, 'k1', 'k2')).toBe(2);
  });
});
