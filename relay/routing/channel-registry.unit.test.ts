import { describe, expect, it } from 'vitest';
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { ChannelRegistry } from './channel-registry.js';

/** One enabled channel's ability row, as the registry's query returns it. */
const row = (id: number) => ({
  ability_group: 'default', model: 'claude-haiku-4-5', ability_priority: 0, ability_weight: 1,
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
