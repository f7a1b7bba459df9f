// Loads the Lua scripts next to this file once per connection with defineCommand. Each is registered
// as `<name>:<sha1 prefix>`, so during a rolling deploy a process never runs another version's copy.
// On a Redis Cluster they are also loaded (SCRIPT LOAD) on every node the client connects to, masters
// and replicas, so the first EVALSHA on a master, or on a replica just promoted by a failover, finds
// its script; a node that still lacks one gets it from ioredis's EVAL fallback on NOSCRIPT.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { projectRoot } from '../../infra/project-root.js';

export interface ScriptDef {
  name: string;
  command: string;
  numberOfKeys: number;
  lua: string;
}

let cached: Map<string, ScriptDef> | undefined;

export function loadScriptDefs(): Map<string, ScriptDef> {
  if (cached) return cached;
  const dir = join(projectRoot(), 'core/quota/lua');
  cached = new Map();
  for (const file of readdirSync(dir)) {
    const m = /^(\w+)-(\d+)\.lua$/.exec(file);
    if (!m) continue;
    const lua = readFileSync(join(dir, file), 'utf8');
    const version = createHash('sha1').update(lua).digest('hex').slice(0, 10);
    cached.set(m[1]!, { name: m[1]!, command: `${m[1]}:${version}`, numberOfKeys: Number(m[2]), lua });
  }
  return cached;
}

const preloading = new WeakSet<object>();

export function defineScripts(redis: Redis): Map<string, ScriptDef> {
  const defs = loadScriptDefs();
  for (const def of defs.values()) {
    if (!(def.command in redis)) redis.defineCommand(def.command, { numberOfKeys: def.numberOfKeys, lua: def.lua });
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
