// RedisBindingWatch against a scripted connection: each answer counts only for the connection it was
// asked on, and each connection gets a check of its own. Review diffreview: a check in flight when the
// connection dropped was handed to the next connection's 'ready', answered nothing there, and no
// check was asked of the new connection (the relay refused requests until its 10 s reload asked).
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { redisKeys } from '../../infra/redis/keys.js';
import { RedisBindingWatch } from './database-binding.js';

const keys = redisKeys('test-binding');
const OURS = '11111111-1111-1111-1111-111111111111';

/** A connection whose GETs answer when the test says (`answer`), as a server holding `held` would. */
class ScriptedConnection extends EventEmitter {
  status = 'ready';
  held: string | null = OURS;
  readonly waiting: ((value: string | null) => void)[] = [];
  get(): Promise<string | null> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  set(): Promise<string> {
    return Promise.resolve('OK');
  }
  /** Answers the oldest GET still waiting with what the server holds now. */
  answer(): void {
    this.waiting.shift()!(this.held);
  }
  drop(): void {
    this.status = 'reconnecting';
    this.emit('close');
  }
  reconnect(): void {
    this.status = 'ready';
    this.emit('ready');
  }
}

const flush = () => new Promise((r) => setImmediate(r));

describe('RedisBindingWatch', () => {
  it('asks the new connection when the check in flight was asked on one that dropped', async () => {
    const conn = new ScriptedConnection();
    const watch = new RedisBindingWatch(conn as unknown as Redis, keys, OURS, () => {});
    const first = watch.check();
    expect(conn.waiting.length).toBe(1);
    conn.drop();
    conn.reconnect();
    // The new connection's own GET, beside the old one (which ioredis sends again).
    expect(conn.waiting.length).toBe(2);
    conn.answer();
    expect(await first).toBeNull();
    expect(watch.owned()).toBe(false);
    conn.answer();
    await flush();
    expect(watch.owned()).toBe(true);
    watch.stop();
  });

  it('is not owned between a reconnect and the answer, and a foreign answer is said once until ours again', async () => {
    const conn = new ScriptedConnection();
    let said = 0;
    const watch = new RedisBindingWatch(conn as unknown as Redis, keys, OURS, () => said++);
    const checked = watch.check();
    conn.answer();
    expect(await checked).toBe(true);
    expect(watch.owned()).toBe(true);
    const before = watch.connection;
    conn.drop();
    expect(watch.connection).toBe(before + 1);
    expect(watch.owned()).toBe(false);
    conn.held = '22222222-2222-2222-2222-222222222222';
    conn.reconnect();
    expect(watch.owned()).toBe(false);
    conn.answer();
    await flush();
    expect(watch.foreign()).toBe(true);
    expect(said).toBe(1);
    // Still foreign after another reconnect to it: said once.
    conn.drop();
    conn.reconnect();
    expect(watch.foreign()).toBe(true);
    conn.answer();
    await flush();
    expect(said).toBe(1);
    // This database's Redis back.
    conn.held = OURS;
    conn.drop();
    conn.reconnect();
    conn.answer();
    await flush();
    expect(watch.owned()).toBe(true);
    expect(watch.foreign()).toBe(false);
    watch.stop();
  });
});
