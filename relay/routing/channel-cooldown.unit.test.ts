// The channels a relay sets aside while their providers keep failing to serve, and how picks treat
// them: tried after every other channel of the route, still taken when none other is left.
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { applyAnnouncedAside, ChannelCooldown } from './channel-cooldown.js';
import { ChannelRegistry } from './channel-registry.js';

const SETTINGS = { failures: 3, ms: 30_000, maxMs: 100_000 };

function clock() {
  const c = { t: 1_000_000, now: () => c.t };
  return c;
}

describe('ChannelCooldown', () => {
  it('sets a channel aside after the failures in a row, for the time, then lets it be tried again', () => {
    const c = clock();
    const setAside: Array<[number, number]> = [];
    const cooldown = new ChannelCooldown(SETTINGS, (id, ms) => setAside.push([id, ms]), c.now);
    expect(cooldown.active).toBe(false);
    cooldown.failed(7);
    cooldown.failed(7);
    expect(cooldown.isAside(7)).toBe(false);
    cooldown.failed(7);
    expect(cooldown.isAside(7)).toBe(true);
    expect(cooldown.active).toBe(true);
    expect(setAside).toEqual([[7, 30_000]]);
    // Failures of requests sent before it was set aside change nothing.
    cooldown.failed(7);
    expect(setAside).toHaveLength(1);
    c.t += 30_000;
    expect(cooldown.isAside(7)).toBe(false);
    expect(cooldown.active).toBe(false);
  });

  it('applies another relay\'s setting aside (setAside) without announcing it again, and its own coming back changes nothing', () => {
    const c = clock();
    const announced: number[] = [];
    const cooldown = new ChannelCooldown(SETTINGS, (_id, ms) => announced.push(ms), c.now);
    cooldown.setAside(9, 30_000);
    expect(cooldown.isAside(9)).toBe(true);
    expect(cooldown.active).toBe(true);
    expect(announced).toEqual([]);
    // A shorter time learnt later does not shorten it.
    c.t += 10_000;
    cooldown.setAside(9, 5_000);
    c.t += 19_999;
    expect(cooldown.isAside(9)).toBe(true);
    c.t += 1;
    expect(cooldown.isAside(9)).toBe(false);
    // Back, one failure sets it aside again, for twice as long.
    cooldown.failed(9);
    expect(announced).toEqual([60_000]);
    // Off (failures 0): nothing is set aside.
    const off = new ChannelCooldown({ failures: 0, ms: 0, maxMs: 0 }, () => {}, c.now);
    off.setAside(9, 30_000);
    expect(off.isAside(9)).toBe(false);
  });

  it('applies an announced time up to its own maximum only (a peer configured otherwise, or a forged message, asked for a day)', () => {
    const c = clock();
    const cooldown = new ChannelCooldown(SETTINGS, () => {}, c.now);
    cooldown.setAside(4, 86_400_000);
    c.t += SETTINGS.maxMs - 1;
    expect(cooldown.isAside(4)).toBe(true);
    c.t += 1;
    expect(cooldown.isAside(4)).toBe(false);
  });

  it('ignores its own announcement coming back, and one of a channel it does not serve', () => {
    const c = clock();
    const announced: Array<[number, number]> = [];
    const cooldown = new ChannelCooldown(SETTINGS, (id, ms) => announced.push([id, ms]), c.now);
    const served = { has: (id: number) => id === 7 };
    for (let i = 0; i < 3; i++) cooldown.failed(7);
    expect(announced).toEqual([[7, 30_000]]);
    // A request on it succeeds before the announcement comes back: the echo does not undo that.
    cooldown.succeeded(7);
    applyAnnouncedAside(cooldown, served, 'relay-a', { id: 7, ms: 30_000, from: 'relay-a' });
    expect(cooldown.isAside(7)).toBe(false);
    // Another relay's is applied.
    applyAnnouncedAside(cooldown, served, 'relay-a', { id: 7, ms: 30_000, from: 'relay-b' });
    expect(cooldown.isAside(7)).toBe(true);
    // Of a channel this relay does not serve: nothing is kept for it.
    applyAnnouncedAside(cooldown, served, 'relay-a', { id: 8, ms: 30_000, from: 'relay-b' });
    expect(cooldown.isAside(8)).toBe(false);
  });

  it('sets it aside again at its first failure once back, twice as long up to the maximum; a success clears it', () => {
    const c = clock();
    const times: number[] = [];
    const cooldown = new ChannelCooldown(SETTINGS, (_id, ms) => times.push(ms), c.now);
    for (let i = 0; i < 3; i++) cooldown.failed(1);
    for (let round = 0; round < 3; round++) {
      c.t += 200_000;
      cooldown.failed(1);
    }
    expect(times).toEqual([30_000, 60_000, 100_000, 100_000]);
    c.t += 200_000;
    cooldown.succeeded(1);
    cooldown.failed(1);
    cooldown.failed(1);
    expect(cooldown.isAside(1)).toBe(false);
    cooldown.failed(1);
    expect(times.at(-1)).toBe(30_000);
  });

  it('a success between failures starts the count over; 0 failures turns it off', () => {
    const cooldown = new ChannelCooldown(SETTINGS);
    cooldown.failed(2);
    cooldown.failed(2);
    cooldown.succeeded(2);
    cooldown.failed(2);
    cooldown.failed(2);
    expect(cooldown.isAside(2)).toBe(false);
    const off = new ChannelCooldown({ failures: 0, ms: 30_000, maxMs: 30_000 });
    for (let i = 0; i < 10; i++) off.failed(3);
    expect(off.isAside(3)).toBe(false);
  });
});

describe('ChannelRegistry.pick with channels set aside', () => {
  const row = (id: number, priority: number) => ({
    ability_group: 'default', model: 'm', ability_priority: priority, ability_weight: 1,
    id, name: `c${id}`, type: 14, base_url: 'http://provider.test', key_ciphertext: Buffer.from('k'), model_mapping: '',
    auto_ban: true, fault_threshold: null, fault_rate_threshold: null, status_time: 0, flex_ratio: null,
  });

  async function registryOf(rows: unknown[], cooldown: ChannelCooldown): Promise<ChannelRegistry> {
    const sql = (async () => rows) as unknown as Sql;
    const registry = new ChannelRegistry(sql, { open: () => 'key' } as unknown as ApiKeyCrypto, undefined, undefined, cooldown);
    await registry.reload();
    return registry;
  }

  it('gives the users of a channel set aside another channel of the tier, then a lower tier, and the channel itself when none is left', async () => {
    const cooldown = new ChannelCooldown(SETTINGS);
    const registry = await registryOf([row(1, 10), row(2, 10), row(3, 0)], cooldown);
    // Affinities whose rendezvous winner is channel 1.
    const onOne = Array.from({ length: 200 }, (_, i) => i * 7919).filter((a) => registry.pick('default', 'm', undefined, a)?.id === 1);
    expect(onOne.length).toBeGreaterThan(20);
    for (let i = 0; i < 3; i++) cooldown.failed(1);
    expect(new Set(onOne.map((a) => registry.pick('default', 'm', undefined, a)?.id))).toEqual(new Set([2]));
    // The others keep their channel: only the one set aside moves its users.
    const onTwo = Array.from({ length: 200 }, (_, i) => i * 7919).filter((a) => !onOne.includes(a));
    expect(onTwo.every((a) => registry.pick('default', 'm', undefined, a)?.id === 2)).toBe(true);
    // Channel 2 tried (a retry): the lower tier before the channel set aside.
    expect(registry.pick('default', 'm', new Set([2]), onOne[0])?.id).toBe(3);
    // Every other channel tried: the one set aside is still taken.
    expect(registry.pick('default', 'm', new Set([2, 3]), onOne[0])?.id).toBe(1);
    // Weighted draws (no affinity) leave it out as well.
    expect(new Set(Array.from({ length: 50 }, () => registry.pick('default', 'm')?.id))).toEqual(new Set([2]));
  });
});
