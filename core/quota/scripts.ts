// Loads the Lua scripts next to this file once per connection with defineCommand. Each is registered
// as `<name>:<sha1 prefix>`, so during a rolling deploy a process never runs another version's copy.
// A file is named `<name>-<keys>.lua` for a fixed number of keys, `<name>-<keys>n.lua` for a script
// that takes `<keys>` keys per item and any number of items (settleReservations-9n.lua): those run
// through batchScript, since a command defined without a key count would be routed on a Redis
// Cluster by its first argument (the count), not by its first key.
// On a Redis Cluster they are also loaded (SCRIPT LOAD) on every node the client connects to, masters
// and replicas, so the first EVALSHA on a master, or on a replica just promoted by a failover, finds
// its script; a node that still lacks one gets it from ioredis's EVAL fallback on NOSCRIPT.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { projectRoot } from '../../infra/project-root.js';
import { defineRedisCommand } from '../../infra/redis/define-command.js';

export interface ScriptDef {
  name: string;
  command: string;
  /** Keys per call; for a batch script (`-<n>n.lua`), keys per item. */
  numberOfKeys: number;
  /** A batch script: any number of items of numberOfKeys keys each. */
  batch: boolean;
  lua: string;
  sha: string;
}

let cached: Map<string, ScriptDef> | undefined;

export function loadScriptDefs(): Map<string, ScriptDef> {
  if (cached) return cached;
  const dir = join(projectRoot(), 'core/quota/lua');
  cached = new Map();
  for (const file of readdirSync(dir)) {
    const m = /^(\w+)-(\d+)(n?)\.lua$/.exec(file);
    if (!m) continue;
    const lua = readFileSync(join(dir, file), 'utf8');
    const sha = createHash('sha1').update(lua).digest('hex');
    cached.set(m[1]!, { name: m[1]!, command: `${m[1]}:${sha.slice(0, 10)}`, numberOfKeys: Number(m[2]), batch: m[3] === 'n', lua, sha });
  }
  return cached;
}

const preloading = new WeakSet<object>();

export function defineScripts(redis: Redis): Map<string, ScriptDef> {
  const defs = loadScriptDefs();
  for (const def of defs.values()) {
    if (!def.batch) defineRedisCommand(redis, def.command, def);
  }
  if (redis.isCluster && !preloading.has(redis)) {
    preloading.add(redis);
    const cluster = redis as unknown as { on(e: '+node', f: (node: Redis) => void): void; nodes(role: 'all'): Redis[] };
    const load = (node: Redis) => {
      for (const def of defs.values()) node.script('LOAD', def.lua).catch(() => undefined);
    };
    cluster.on('+node', load);
    for (const node of cluster.nodes('all')) load(node);
  }
  return defs;
}

export type BatchScriptFn = (keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown>;

/**
 * Runs a batch script (`-<n>n.lua`) by EVALSHA with its key count, so that a cluster routes it by its
 * first key like any command; a node that lacks the script (restarted, or a replica just promoted)
 * gets it once by EVAL, as defineCommand's scripts do.
 */
export function batchScript(redis: Redis, def: ScriptDef): BatchScriptFn {
  if (!def.batch) throw new Error(`Lua script ${def.name} is not a batch script`);
  return (keys, args) => redis.evalsha(def.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
    if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
    return redis.eval(def.lua, keys.length, ...keys, ...args);
  });
}
