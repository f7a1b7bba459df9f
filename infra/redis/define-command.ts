// A Lua script bound to a connection as a command (ioredis defineCommand), safe to define while the
// connection is in use.
//
// ioredis's auto-pipelining opens a pipeline with the first command of a loop turn and copies the
// connection's script commands into it then. A script defined later in the same turn is missing from
// that pipeline: its call fails inside ioredis after leaving a callback behind with no command, and
// the batch's reply then throws "results[i] is not iterable" from a process.nextTick, an uncaught
// TypeError that ends the process (redis/ioredis #1931). A relay started its Redis clock's script
// while its check of Redis persistence was in such a pipeline and fell over that way. So a command
// defined here is also given to the pipelines already open for the current turn.
import type { Redis } from 'ioredis';

export interface CommandScript {
  /** Keys the script takes; left out: the caller passes the count first, as EVAL does. */
  numberOfKeys?: number;
  lua: string;
}

// The parts of ioredis (6.x) this reads: the open auto-pipelines, a connection's defined scripts and
// a pipeline's table of them (ioredis's Pipeline constructor fills both).
interface AutoPipelined {
  _autoPipelines?: Map<string, PipelineInternals>;
  scriptsSet?: Record<string, { sha: string }>;
}
interface PipelineInternals {
  _shaToScript?: Record<string, unknown>;
  [command: string]: unknown;
}

/** Defines `name` on `redis` once (a second call with the same name is a no-op). */
export function defineRedisCommand(redis: Redis, name: string, script: CommandScript): void {
  if (name in redis) return;
  redis.defineCommand(name, script.numberOfKeys === undefined ? { lua: script.lua } : { numberOfKeys: script.numberOfKeys, lua: script.lua });
  const internals = redis as unknown as AutoPipelined & Record<string, unknown>;
  const open = internals._autoPipelines;
  if (open === undefined || open.size === 0) return;
  const defined = internals.scriptsSet?.[name];
  for (const pipeline of open.values()) {
    if (name in pipeline) continue;
    if (defined !== undefined && pipeline._shaToScript !== undefined) pipeline._shaToScript[defined.sha] = defined;
    pipeline[name] = internals[name];
    pipeline[`${name}Buffer`] = internals[`${name}Buffer`];
  }
}
