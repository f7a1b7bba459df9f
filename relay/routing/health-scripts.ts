// The routing Lua scripts (lua/ next to this file), loaded once per connection under
// `<name>:<sha1 prefix>` like core/quota/scripts.ts, so a rolling deploy never runs another version.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { projectRoot } from '../../infra/project-root.js';
import { defineRedisCommand } from '../../infra/redis/define-command.js';

export type RecordOutcomeFn = (...args: (string | number)[]) => Promise<[number, number, number, number]>;

const NAME = 'recordChannelOutcome';
let lua: string | undefined;

/** recordChannelOutcome-2.lua bound to this connection. */
export function recordChannelOutcomeScript(redis: Redis): RecordOutcomeFn {
  lua ??= readFileSync(join(projectRoot(), 'relay/routing/lua/recordChannelOutcome-2.lua'), 'utf8');
  const command = `${NAME}:${createHash('sha1').update(lua).digest('hex').slice(0, 10)}`;
  defineRedisCommand(redis, command, { numberOfKeys: 2, lua });
  return (redis as unknown as Record<string, RecordOutcomeFn>)[command]!.bind(redis);
}
