// Loads the Lua scripts next to this file once per connection with defineCommand. Each is registered
// as `<name>:<sha1 prefix>`, so during a rolling deploy a process never runs another version's copy.
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

export function defineScripts(redis: Redis): Map<string, ScriptDef> {
  const defs = loadScriptDefs();
  for (const def of defs.values()) {
    if (!(def.command in redis)) redis.defineCommand(def.command, { numberOfKeys: def.numberOfKeys, lua: def.lua });
  }
  return defs;
}
