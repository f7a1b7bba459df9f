// Routing across a key's groups (one group, or the `auto` list in order): which of them serve a
// model, the models they serve, and where the next channel comes from when one fails.
import type { Channel, ChannelRegistry } from './channel-registry.js';

/** The groups of `allowed` that serve the model, in order; only the first unless `all`. */
export function servingGroups(allowed: readonly string[], channels: ChannelRegistry, model: string, all: boolean): readonly string[] {
  if (allowed.length === 1) return channels.serves(allowed[0]!, model) ? allowed : [];
  const served: string[] = [];
  for (const g of allowed) {
    if (!channels.serves(g, model)) continue;
    served.push(g);
    if (!all) break;
  }
  return served;
}

/** Models some channel serves in any of `groups`. */
export function servedModels(channels: ChannelRegistry, groups: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const g of groups) for (const m of channels.modelsOf(g)) out.add(m);
  return out;
}

/**
 * A request's place in its groups. The exchange itself is one, so picking the next channel hands
 * back two things (the channel, and the group it came from) without a pair allocated per try.
 */
export interface GroupCursor {
  readonly routeGroups: readonly string[];
  /** Index in routeGroups of the group pickNextChannel last found a channel in. */
  nextGroupIndex: number;
  /** The request's cache-affinity hash (affinity.ts affinityOf); absent: a weighted draw. */
  readonly affinity?: number;
}

/**
 * The next channel not in `tried`: within group `from` by priority then affinity (or weight), else in the groups
 * after it, in order. A channel set aside (channel-cooldown.ts) only when no group has another: an
 * `auto` key's requests went on to a set-aside channel of its first group, hung or failing, while the
 * next group had a healthy one (review routing). The group it came from is left in `cursor.nextGroupIndex`.
 */
export function pickNextChannel(channels: ChannelRegistry, cursor: GroupCursor, from: number, model: string, tried: ReadonlySet<number>): Channel | undefined {
  const groups = cursor.routeGroups;
  const passes = groups.length - from > 1 ? 2 : 1;
  for (let pass = 0; pass < passes; pass++) {
    // One group: pick() itself falls back to a set-aside channel. Several: none in the first pass.
    const asideToo = passes === 1 || pass === 1;
    for (let i = from; i < groups.length; i++) {
      const next = channels.pick(groups[i]!, model, tried, cursor.affinity, asideToo);
      if (next) {
        cursor.nextGroupIndex = i;
        return next;
      }
    }
  }
  return undefined;
}
