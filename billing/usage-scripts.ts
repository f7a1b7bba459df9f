// The billing worker's own Lua scripts (billing/lua/), loaded once per connection under
// `<name>:<sha1 prefix>` as core/quota/scripts.ts does for the quota scripts, so a rolling deploy
// never runs another version's copy. A file is named `<name>-<keys>.lua`; each starts with a header
// saying its keys, arguments, reply and (by its shebang) whether it runs at maxmemory. On a cluster,
// ioredis sends a script by EVALSHA to the master of its first key and once by EVAL where that node
// lacks it; all of a call's keys are in one shard's slot.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { resendingMoved } from '../infra/redis/client.js';
import { projectRoot } from '../infra/project-root.js';
import { defineRedisCommand } from '../infra/redis/define-command.js';

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

interface ScriptDef {
  command: string;
  numberOfKeys: number;
  lua: string;
}

let defs: Map<string, ScriptDef> | undefined;

function loadDefs(): Map<string, ScriptDef> {
  if (defs) return defs;
  const dir = join(projectRoot(), 'billing/lua');
  defs = new Map();
  for (const file of readdirSync(dir)) {
    const m = /^(\w+)-(\d+)\.lua$/.exec(file);
    if (!m) continue;
    const lua = readFileSync(join(dir, file), 'utf8');
    defs.set(m[1]!, { command: `${m[1]}:${createHash('sha1').update(lua).digest('hex').slice(0, 10)}`, numberOfKeys: Number(m[2]), lua });
  }
  return defs;
}

function bind(redis: Redis, name: string): ScriptFn {
  const def = loadDefs().get(name);
  if (!def) throw new Error(`billing Lua script ${name} not found in billing/lua`);
  defineRedisCommand(redis, def.command, def);
  const script = (redis as unknown as Record<string, ScriptFn>)[def.command]!.bind(redis);
  // On a cluster a script answered MOVED (a slot moved under a batch ioredis does not redirect,
  // infra/redis/client.ts) is sent again once the slot table is reloaded: the node did not run it.
  return resendingMoved(redis, script);
}

/** A read: this consumer's pending entries ('0') or new ones ('>'), or a claim of entries idle `minIdleMs`. */
export type UsageRead = { mode: 'read'; id: '0' | '>' } | { mode: 'claim'; minIdleMs: number };

/** One dead letter: the fields of the entry written to the dead-letter stream. */
export type DeadLetterFields = readonly string[];

export interface UsageScripts {
  /**
   * readUsageEntries-2.lua: the read and the Redis data's id (created when missing), atomically;
   * nothing read (a third element, 1) when `lastIncarnation` (not '') is not the data's id.
   */
  read(stream: string, incarnationKey: string, newIncarnation: string, group: string, consumer: string, count: number, read: UsageRead, lastIncarnation?: string): Promise<[string, unknown, number?]>;
  /** ackUsageEntries-1.lua: XACK + XDEL of settled entries. Returns the number acknowledged. */
  acknowledge(stream: string, group: string, ids: readonly string[]): Promise<number>;
  /** deadLetterUsageEntries-2.lua: the dead letters written, then `ids` acknowledged and deleted; all or nothing. */
  deadLetter(stream: string, deadLetterStream: string, group: string, ids: readonly string[], letters: readonly DeadLetterFields[]): Promise<number>;
  /** ensureUsageGroup-1.lua: the group created (true) or already there (false). */
  ensureGroup(stream: string, group: string, startId: string): Promise<boolean>;
  /** pruneIdleConsumers-1.lua: the consumers removed (idle, nothing pending, not `self`). */
  pruneIdleConsumers(stream: string, group: string, self: string, idleMs: number): Promise<string[]>;
}

export function usageScripts(redis: Redis): UsageScripts {
  const read = bind(redis, 'readUsageEntries');
  const ack = bind(redis, 'ackUsageEntries');
  const dead = bind(redis, 'deadLetterUsageEntries');
  const group = bind(redis, 'ensureUsageGroup');
  const prune = bind(redis, 'pruneIdleConsumers');
  return {
    async read(stream, incarnationKey, newIncarnation, groupName, consumer, count, r, lastIncarnation = '') {
      const arg = r.mode === 'claim' ? r.minIdleMs : r.id;
      return (await read(stream, incarnationKey, newIncarnation, groupName, consumer, count, r.mode, arg, lastIncarnation)) as [string, unknown, number?];
    },
    async acknowledge(stream, groupName, ids) {
      return Number(await ack(stream, groupName, ...ids));
    },
    async deadLetter(stream, deadLetterStream, groupName, ids, letters) {
      const args: (string | number)[] = [groupName, ids.length, ...ids];
      for (const fields of letters) args.push(fields.length, ...fields);
      return Number(await dead(stream, deadLetterStream, ...args));
    },
    async ensureGroup(stream, groupName, startId) {
      return Number(await group(stream, groupName, startId)) === 1;
    },
    async pruneIdleConsumers(stream, groupName, self, idleMs) {
      return ((await prune(stream, groupName, self, idleMs)) as unknown[]).map(String);
    },
  };
}
