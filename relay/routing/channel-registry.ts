// Which channels serve a (group, model) pair, precomputed from the abilities table into priority
// tiers, so that picking a channel on the hot path is a map lookup and, within the tier, a hash per
// candidate (cache affinity by rendezvous hashing, affinity.ts) or a weighted draw.
//
// Only enabled channels (status 1) are loaded: a channel disabled automatically (status 3) leaves
// every relay's routes on the reload its invalidation message triggers (channel-health.ts).
import { isOpenAiApi } from '../providers/openai/service-tier.js';
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { channelSeed, rendezvousScore } from './affinity.js';
import { ChannelCooldown, COOLDOWN_OFF } from './channel-cooldown.js';
import { coalescedReload } from '../coalesced-reload.js';

/** When a channel is disabled automatically: its overrides of the fleet's settings (channel-health.ts). */
export interface ChannelHealthRules {
  /** false: never disabled automatically. */
  autoBan: boolean;
  /** Consecutive channel faults that disable it; null: the fleet's CHANNEL_FAULTS_TO_DISABLE. */
  faultThreshold: number | null;
  /** Fault rate that disables it; null: the fleet's CHANNEL_FAULT_RATE_TO_DISABLE. */
  faultRateThreshold: number | null;
  /** Its last status change, Unix ms: faults recorded before it no longer count. */
  epochMs: number;
}

export interface Channel {
  id: number;
  name: string;
  type: number;
  baseUrl: string;
  /** The provider credential, decrypted once at load. */
  apiKey: string;
  /** Request model → provider model, when the channel renames models. */
  modelMapping: Readonly<Record<string, string>> | null;
  health: ChannelHealthRules;
  /** Its rendezvous-hashing seed (affinity.ts). */
  seed: number;
  /**
   * What its provider charges for an answer served at the `flex` service tier, as a fraction of the
   * standard price (channels.flex_ratio, 0 < r ≤ 1; 1 bills flex as standard).
   */
  flexRatio: number;
  /** Its base URL is OpenAI's own API (relay/providers/openai/service-tier.ts), worked out once at load. */
  openAiApi: boolean;
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
  /** Per (group, model): the models its channels send the provider (model_mapping's, or the model itself). */
  #sentModels = new Map<string, string[]>();
  #models = new Map<string, Set<string>>();
  #loaded = new Set<number>();
  #channels = new Map<number, Channel>();

  readonly #onUnreadable: (channelId: number, err: Error) => void;
  readonly #onRouteChange: (channelId: number, joined: boolean) => void;
  #reloaded = false;
  /** Enabled channels whose credential the last reload could not open (another KEY_SECRET sealed it). */
  #unreadableCount = 0;

  /** The channels this relay sets aside for a while, as their providers keep failing (channel-cooldown.ts). */
  readonly cooldown: ChannelCooldown;
  /** The picks' exclusion while some channel is aside: the tried ones and those aside (reused: picks are synchronous). */
  readonly #triedOrAside: TriedOrAside;

  /**
   * `onRouteChange`: a channel joined or left the routes between two reloads (enabled again, disabled
   * automatically or by an administrator, created, deleted); not called for the first load.
   */
  constructor(sql: Sql, crypto: ApiKeyCrypto, onUnreadable: (channelId: number, err: Error) => void = () => {},
    onRouteChange: (channelId: number, joined: boolean) => void = () => {}, cooldown: ChannelCooldown = new ChannelCooldown(COOLDOWN_OFF)) {
    this.#sql = sql;
    this.#crypto = crypto;
    this.#onUnreadable = onUnreadable;
    this.#onRouteChange = onRouteChange;
    this.cooldown = cooldown;
    this.#triedOrAside = new TriedOrAside(cooldown);
  }

  /** Reads the enabled channels and installs them; one read at a time, the calls made meanwhile sharing one after it (coalesced-reload.ts). */
  readonly reload: () => Promise<void> = coalescedReload(() => this.#sql`
      SELECT a."group" AS ability_group, a.model, a.priority AS ability_priority, a.weight AS ability_weight,
             c.id, c.name, c.type, c.base_url, c.key_ciphertext, c.model_mapping,
             c.auto_ban, c.fault_threshold, c.fault_rate_threshold, c.status_time, c.flex_ratio
      FROM abilities a JOIN channels c ON c.id = a.channel_id
      WHERE a.enabled AND c.status = 1`, (rows) => this.#install(rows));

  #install(rows: readonly unknown[]): void {
    const channels = new Map<number, Channel>();
    const unreadable = new Set<number>();
    const byRoute = new Map<string, Map<number, Candidate[]>>();
    const models = new Map<string, Set<string>>();
    const sentModels = new Map<string, string[]>();
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
          health: {
            autoBan: r.auto_ban as boolean,
            faultThreshold: r.fault_threshold === null ? null : Number(r.fault_threshold),
            faultRateThreshold: r.fault_rate_threshold === null ? null : Number(r.fault_rate_threshold),
            epochMs: Number(r.status_time) * 1000,
          },
          seed: channelSeed(id),
          flexRatio: flexRatioOf(r.flex_ratio),
          openAiApi: isOpenAiApi(r.base_url as string),
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
      const sent = channel.modelMapping?.[model] ?? model;
      let sentList = sentModels.get(routeKey);
      if (!sentList) sentModels.set(routeKey, (sentList = []));
      if (!sentList.includes(sent)) sentList.push(sent);
      let set = models.get(group);
      if (!set) models.set(group, (set = new Set()));
      set.add(model);
    }
    const routes = new Map<string, Tiers>();
    for (const [key, tiers] of byRoute) {
      routes.set(key, [...tiers.entries()].sort((a, b) => b[0] - a[0]).map(([, c]) => c));
    }
    const before = this.#loaded;
    this.#unreadableCount = unreadable.size;
    this.#routes = routes;
    this.#sentModels = sentModels;
    this.#models = models;
    this.#loaded = new Set(channels.keys());
    this.#channels = channels;
    if (this.#reloaded) {
      for (const id of this.#loaded) if (!before.has(id)) this.#onRouteChange(id, true);
      for (const id of before) if (!this.#loaded.has(id)) this.#onRouteChange(id, false);
    }
    this.#reloaded = true;
  }

  /**
   * Whether the last reload found enabled channels and could open none of their credentials: the
   * relay was given another KEY_SECRET than the one the console sealed them with (a `make clean` that
   * generated a new one, a secret copied wrong), and would answer every request as unserved.
   */
  openedNoCredential(): { unreadable: number } | null {
    return this.#channels.size === 0 && this.#unreadableCount > 0 ? { unreadable: this.#unreadableCount } : null;
  }

  /**
   * The channel to try for (group, model): the highest priority tier that still has a channel not in
   * `exclude`, then within it the rendezvous winner for `affinity` (affinity.ts), or without one a
   * draw weighted by `weight`. Channels of weight 0 are taken only when every open one has weight 0.
   * A channel set aside (channel-cooldown.ts) is taken only when no other is left, and never with
   * `asideToo` false (a caller with other groups to look in first: pickNextChannel).
   */
  pick(group: string, model: string, exclude?: ReadonlySet<number>, affinity?: number, asideToo = true): Channel | undefined {
    const tiers = this.#routes.get(routeOf(group, model));
    if (!tiers) return undefined;
    if (this.cooldown.active) {
      const skip = this.#triedOrAside;
      skip.tried = exclude;
      const found = pickFrom(tiers, skip, affinity);
      skip.tried = undefined;
      if (found || !asideToo) return found;
    }
    return pickFrom(tiers, exclude, affinity);
  }

  /** The enabled channel of this id, if the last reload loaded it. */
  channel(channelId: number): Channel | undefined {
    return this.#channels.get(channelId);
  }

  /** Whether every channel that serves (group, model) passes `test` (true when none serves it). */
  everyChannel(group: string, model: string, test: (channel: Channel) => boolean): boolean {
    const tiers = this.#routes.get(routeOf(group, model));
    if (!tiers) return true;
    for (const tier of tiers) for (const c of tier) if (!test(c.channel)) return false;
    return true;
  }

  /**
   * The models the channels of (group, model) send their provider: each channel's model_mapping of
   * the model, or the model itself. Their windows bound the prompt a provider reads, not the asked
   * model's. Empty when none serves it.
   */
  sentModels(group: string, model: string): readonly string[] {
    return this.#sentModels.get(routeOf(group, model)) ?? NONE;
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

const NONE: readonly string[] = [];

/** What a pick leaves out: `has` is all it asks. */
interface Exclusion {
  has(channelId: number): boolean;
}

class TriedOrAside implements Exclusion {
  tried: ReadonlySet<number> | undefined = undefined;
  readonly #cooldown: ChannelCooldown;

  constructor(cooldown: ChannelCooldown) {
    this.#cooldown = cooldown;
  }

  has(channelId: number): boolean {
    return this.tried?.has(channelId) === true || this.#cooldown.isAside(channelId);
  }
}

function pickFrom(tiers: Tiers, exclude: Exclusion | undefined, affinity: number | undefined): Channel | undefined {
  for (const tier of tiers) {
    const found = affinity === undefined ? drawByWeight(tier, exclude) : rendezvous(tier, exclude, affinity);
    if (found) return found;
  }
  return undefined;
}

/** The rendezvous winner among the tier's channels not in `exclude`; undefined when none is open. */
function rendezvous(tier: readonly Candidate[], exclude: Exclusion | undefined, affinity: number): Channel | undefined {
  let best: Channel | undefined;
  let bestScore = -1;
  let anyWeighted = false;
  for (const c of tier) {
    if (c.weight <= 0 || exclude?.has(c.channel.id)) continue;
    anyWeighted = true;
    const score = rendezvousScore(affinity, c.channel.seed, c.weight);
    if (score > bestScore) {
      bestScore = score;
      best = c.channel;
    }
  }
  if (anyWeighted) return best;
  // Every open channel has weight 0: each counts as 1.
  for (const c of tier) {
    if (exclude?.has(c.channel.id)) continue;
    const score = rendezvousScore(affinity, c.channel.seed, 1);
    if (score > bestScore) {
      bestScore = score;
      best = c.channel;
    }
  }
  return best;
}

/** A draw weighted by `weight` among the tier's channels not in `exclude` (uniform when all weigh 0). */
function drawByWeight(tier: readonly Candidate[], exclude: Exclusion | undefined): Channel | undefined {
  let total = 0;
  let open = 0;
  for (const c of tier) {
    if (exclude?.has(c.channel.id)) continue;
    total += c.weight;
    open++;
  }
  if (open === 0) return undefined;
  let point = Math.random() * (total > 0 ? total : open);
  for (const c of tier) {
    if (exclude?.has(c.channel.id)) continue;
    point -= total > 0 ? c.weight : 1;
    if (point < 0) return c.channel;
  }
  for (let i = tier.length - 1; i >= 0; i--) if (!exclude?.has(tier[i]!.channel.id)) return tier[i]!.channel;
  return undefined;
}

function routeOf(group: string, model: string): string {
  return group + '\n' + model;
}

function parseMapping(raw: string): Record<string, string> | null {
  if (!raw) return null;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!parsed || typeof parsed !== 'object') return null;
    // No prototype: a model named "constructor" or "toString" must not map to Object's own.
    const out: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'string' && v) out[k] = v;
    return Object.keys(out).length ? out : null;
  } catch {
    return null;
  }
}

/**
 * A channel's flex ratio as the relay bills with it: the column's CHECK keeps it in (0, 1]; anything
 * else (a row written around the constraint) bills flex at the standard price, never below it.
 */
export function flexRatioOf(raw: unknown): number {
  const r = Number(raw);
  return r > 0 && r <= 1 ? r : 1;
}
