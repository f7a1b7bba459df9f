import { describe, expect, it } from 'vitest';
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { ChannelCooldown } from './channel-cooldown.js';
import { ChannelRegistry } from './channel-registry.js';
import { pickNextChannel } from './group-routing.js';

/** One enabled channel's ability row, as the registry's query returns it. */
const row = (id: number, group = 'default') => ({
  ability_group: group, model: 'claude-haiku-4-5', ability_priority: 0, ability_weight: 1,
  id, name: `c${id}`, type: 14, base_url: 'http://provider.test', key_ciphertext: Buffer.from('k'), model_mapping: '',
  auto_ban: true, fault_threshold: null, fault_rate_threshold: null, status_time: 0, flex_ratio: null,
});

describe('ChannelRegistry.reload', () => {
  it('ends at the newer state: a reload asked while a read runs reads again after it (the periodic reload overlapping an invalidation\'s)', async () => {
    // Each query's rows are handed over when the test chooses.
    const pending: Array<(rows: unknown[]) => void> = [];
    const sql = (() => new Promise((resolve) => pending.push(resolve))) as unknown as Sql;
    const crypto = { open: () => 'key' } as unknown as ApiKeyCrypto;
    const registry = new ChannelRegistry(sql, crypto);
    const older = registry.reload();
    const newer = registry.reload();
    // One read at a time: the second begins once the first has installed.
    expect(pending).toHaveLength(1);
    pending[0]!([row(7)]);
    await older;
    expect(registry.has(7)).toBe(true);
    await new Promise((r) => setImmediate(r));
    // The newer read: channel 7 was disabled meanwhile.
    pending[1]!([]);
    await newer;
    expect(registry.has(7)).toBe(false);
    expect(registry.serves('default', 'claude-haiku-4-5')).toBe(false);
  });
});

// Review routing: an `auto` key with cross_group_retry went on to its first group's set-aside channel
// (a provider that hangs: 504 after 504) while the next group had a healthy one.
describe('pickNextChannel over several groups', () => {
  it('takes a later group\'s channel before a set-aside one, and the set-aside one when no group has another', async () => {
    const cooldown = new ChannelCooldown({ failures: 1, ms: 60_000, maxMs: 60_000 });
    const sql = (() => Promise.resolve([row(1, 'vip'), row(2, 'default')])) as unknown as Sql;
    const registry = new ChannelRegistry(sql, { open: () => 'key' } as unknown as ApiKeyCrypto, undefined, undefined, cooldown);
    await registry.reload();
    const cursor = { routeGroups: ['vip', 'default'], nextGroupIndex: 0 };
    const next = (tried: number[] = []) => pickNextChannel(registry, cursor, 0, 'claude-haiku-4-5', new Set(tried))?.id;
    expect([next(), cursor.nextGroupIndex]).toEqual([1, 0]);
    cooldown.failed(1);
    expect([next(), cursor.nextGroupIndex]).toEqual([2, 1]);
    // The healthy one tried: the set-aside one still serves rather than nothing.
    expect([next([2]), cursor.nextGroupIndex]).toEqual([1, 0]);
    // One group: its set-aside channel, as pick() gives it.
    expect(pickNextChannel(registry, { routeGroups: ['vip'], nextGroupIndex: 0 }, 0, 'claude-haiku-4-5', new Set())?.id).toBe(1);
  });
});
