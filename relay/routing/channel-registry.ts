// Which channels serve a (group, model) pair, precomputed from the abilities table into priority
// tiers, so that picking a channel on the hot path is a map lookup and a weighted draw.
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';

export interface Channel {
  id: number;
  name: string;
  type: number;
  baseUrl: string;
  /** The provider credential, decrypted once at load. */
  apiKey: string;
  /** Request model → provider model, when the channel renames models. */
  modelMapping: Readonly<Record<string, string>> | null;
}

interface Candidate {
  channel: Channel;
  weight: number;
}

/** Candidates of one (group, model), highest priority tier first. */
type Tiers = Candidate[][];

export class ChannelRegistry {
  readonly #sql: Sql;
  readonly #crypto: ApiKeyCrypto;
  #routes = new Map<string, Tiers>();
  #models = new Map<string, Set<string>>();
  #loaded = new Set<number>();

  readonly #onUnreadable: (channelId: number, err: Error) => void;

  constructor(sql: Sql, crypto: ApiKeyCrypto, onUnreadable: (channelId: number, err: Error) => void = () => {}) {
    this.#sql = sql;
    this.#crypto = crypto;
    this.#onUnreadable = onUnreadable;
  }

  async reload(): Promise<void> {
    const rows = await this.#sql`
      SELECT a."group" AS ability_group, a.model, a.priority AS ability_priority, a.weight AS ability_weight,
             c.id, c.name, c.type, c.base_url, c.key_ciphertext, c.model_mapping
      FROM abilities a JOIN channels c ON c.id = a.channel_id
      WHERE a.enabled AND c.status = 1`;
    const channels = new Map<number, Channel>();
    const unreadable = new Set<number>();
    const byRoute = new Map<string, Map<number, Candidate[]>>();
    const models = new Map<string, Set<string>>();
    for (const r of rows as Record<string, unknown>[]) {
      const id = r.id as number;
      if (unreadable.has(id)) continue;
      let channel = channels.get(id);
      if (!channel) {
        let apiKey: string;
        try {
          apiKey = this.#crypto.open(r.key_ciphertext as Buffer);
        } catch (err) {
          // One channel sealed under another KEY_SECRET must not take every route down with it.
          unreadable.add(id);
          this.#onUnreadable(id, err as Error);
          continue;
        }
        channel = {
          id,
          name: r.name as string,
          type: r.type as number,
          baseUrl: (r.base_url as string).replace(/\/+$/, ''),
          apiKey,
          modelMapping: parseMapping(r.model_mapping as string),
        };
        channels.set(id, channel);
      }
      const group = r.ability_group as string;
      const model = r.model as string;
      const routeKey = routeOf(group, model);
      let tiers = byRoute.get(routeKey);
      if (!tiers) byRoute.set(routeKey, (tiers = new Map()));
      const priority = r.ability_priority as number;
      let tier = tiers.get(priority);
      if (!tier) tiers.set(priority, (tier = []));
      tier.push({ channel, weight: Math.max(0, r.ability_weight as number) });
      let set = models.get(group);
      if (!set) models.set(group, (set = new Set()));
      set.add(model);
    }
    const routes = new Map<string, Tiers>();
    for (const [key, tiers] of byRoute) {
      routes.set(key, [...tiers.entries()].sort((a, b) => b[0] - a[0]).map(([, c]) => c));
    }
    this.#routes = routes;
    this.#models = models;
    this.#loaded = new Set(channels.keys());
  }

  /**
   * The channel to try for (group, model): the highest priority tier that still has a channel not in
   * `exclude`, then a draw weighted by `weight` within it.
   */
  pick(group: string, model: string, exclude?: ReadonlySet<number>): Channel | undefined {
    const tiers = this.#routes.get(routeOf(group, model));
    if (!tiers) return undefined;
    for (const tier of tiers) {
      let total = 0;
      let open = 0;
      for (const c of tier) {
        if (exclude?.has(c.channel.id)) continue;
        total += c.weight;
        open++;
      }
      if (open === 0) continue;
      // All weights zero: a uniform draw among the open ones.
      let point = Math.random() * (total > 0 ? total : open);
      for (const c of tier) {
        if (exclude?.has(c.channel.id)) continue;
        point -= total > 0 ? c.weight : 1;
        if (point < 0) return c.channel;
      }
      for (let i = tier.length - 1; i >= 0; i--) if (!exclude?.has(tier[i]!.channel.id)) return tier[i]!.channel;
    }
    return undefined;
  }

  /** Whether some channel serves (group, model): pick() without exclusions finds one. */
  serves(group: string, model: string): boolean {
    return this.#routes.has(routeOf(group, model));
  }

  /** Whether the last reload included this (enabled) channel. */
  has(channelId: number): boolean {
    return this.#loaded.has(channelId);
  }

  /** Models some channel serves for a group. */
  modelsOf(group: string): ReadonlySet<string> {
    return this.#models.get(group) ?? new Set();
  }
}

function routeOf(group: string, model: string): string {
  return group + '\n' + model;
}

function parseMapping(raw: string): Record<string, string> | null {
  if (!raw) return null;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!parsed || typeof parsed !== 'object') return null;
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string' && v) out[k] = v;
    return Object.keys(out).length ? out : null;
  } catch {
    return null;
  }
}
