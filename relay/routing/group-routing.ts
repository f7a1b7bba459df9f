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
 * after it, in order. The group it came from is left in `cursor.nextGroupIndex`.
 */
export function pickNextChannel(channels: ChannelRegistry, cursor: GroupCursor, from: number, model: string, tried: ReadonlySet<number>): Channel | undefined {
  const groups = cursor.routeGroups;
  for (let i = from; i < groups.length; i++) {
    const next = channels.pick(groups[i]!, model, tried, cursor.affinity);
    if (next) {
      cursor.nextGroupIndex = i;
      return next;
    }
  }
  return undefined;
}
