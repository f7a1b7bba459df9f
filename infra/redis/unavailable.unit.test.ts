import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isRedisUnavailable } from './unavailable.js';

describe('isRedisUnavailable', () => {
  it('no connection, no answer, or a server that cannot serve now', () => {
    // ioredis does not export its class; the integration test meets a real one.
    expect(isRedisUnavailable(Object.assign(new Error('Reached the max retries per request limit (which is 2). Refer to "maxRetriesPerRequest" option for details.'), { name: 'MaxRetriesPerRequestError' }))).toBe(true);
    expect(isRedisUnavailable(new Error('Connection is closed.'))).toBe(true);
    expect(isRedisUnavailable(new Error('Stream isn\'t writeable and enableOfflineQueue options is false'))).toBe(true);
    expect(isRedisUnavailable(new Error('Command timed out'))).toBe(true);
    for (const m of ['LOADING Redis is loading the dataset in memory', 'CLUSTERDOWN The cluster is down', 'TRYAGAIN Multiple keys request during rehashing of slot', 'MASTERDOWN Link with MASTER is down', 'BUSY Redis is busy running a script']) {
      expect(isRedisUnavailable(new ReplyError(m)), m).toBe(true);
    }
  });

  it('not an error of the command itself, nor anything else', () => {
    expect(isRedisUnavailable(new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe(false);
    expect(isRedisUnavailable(new ReplyError('ERR unknown command'))).toBe(false);
    expect(isRedisUnavailable(new Error('something else'))).toBe(false);
    expect(isRedisUnavailable(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(false);
    expect(isRedisUnavailable('Connection is closed.')).toBe(false);
    expect(isRedisUnavailable(null)).toBe(false);
  });
});
