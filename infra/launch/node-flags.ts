// The Node flags the relay and the billing worker are started with. They cannot be the services' own
// settings (infra/config.ts): V8 sizes its heap when the process starts, NODE_OPTIONS refuses these
// flags and v8.setFlagsFromString() afterwards changes nothing, so whatever launches a service puts
// them on its command line: infra/scripts/start-stack.sh and cluster-up.sh (through node-flags-main.ts)
// and the bench's stack (bench/lib/stack.ts). A deployment does the same:
//   node $(node dist/infra/launch/node-flags-main.js relay) dist/relay/main.js
//
// The default is a large first old generation. Both services promote a few KB of every request to the
// old generation (what is in flight when a scavenge runs: the settlements waiting for Redis, the
// billing worker's batch of ~500 events across its Postgres round trips), and with V8's default limit,
// computed from a live heap of ~20 MB, that set off a full mark-compact every 1.5-2 s under load, with
// concurrent marking on the other core. With 256 MB none ran in the bench's runs: the relay's CPU per
// request fell 5-10% and the billing worker's 30-45%, and the relay's tail latency with it
// (docs/performance.md, "A larger first old generation, and the billing worker's array parameters"). The price is memory: each process may hold up
// to about 256 MB of garbage before its first full collection.
import { z } from 'zod';

export const LAUNCHED_SERVICES = ['relay', 'billing'] as const;

export type LaunchedService = (typeof LAUNCHED_SERVICES)[number];

/** The old generation's first size, in MB, unless RELAY_NODE_FLAGS / BILLING_NODE_FLAGS say otherwise. */
export const DEFAULT_INITIAL_OLD_SPACE_MB = 256;

/** Node's command-line flags, each `--name` or `--name=value`: a typo fails the start loudly, not later. */
const flags = z.string().regex(/^\s*(--[a-z0-9-]+(=\S+)?\s*)*$/, 'Node flags: space-separated --name or --name=value');

/**
 * The flags `service` starts with: `<SERVICE>_NODE_FLAGS` when set (empty: none), else the default. The
 * environment is passed in, as to loadConfig: this module reads no process.env of its own.
 */
export function nodeFlagsFor(service: LaunchedService, env: Record<string, string | undefined>): string[] {
  const name = `${service.toUpperCase()}_NODE_FLAGS`;
  const given = env[name];
  if (given === undefined) return [`--initial-old-space-size=${DEFAULT_INITIAL_OLD_SPACE_MB}`];
  const parsed = flags.safeParse(given);
  if (!parsed.success) throw new Error(`${name}: ${parsed.error.issues[0]!.message}, not ${JSON.stringify(given)}`);
  return parsed.data.split(/\s+/).filter(Boolean);
}
