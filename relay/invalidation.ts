// Applies the console's change announcements (pub/sub on keys.invalidationChannel(), the message of
// core/invalidation/invalidation.ts) to the relay's caches.
import type { Redis } from 'ioredis';
import { parseInvalidation } from '../core/invalidation/invalidation.js';
import type { Logger } from '../infra/logger.js';

export interface InvalidationTargets {
  token(id: number): void;
  user(id: number): void;
  channels(): Promise<void>;
  options(): Promise<void>;
  channelAside(id: number, ms: number, from: string | undefined): void;
}

export async function subscribeInvalidations(sub: Redis, channel: string, targets: InvalidationTargets, log: Logger): Promise<void> {
  sub.on('message', (_ch: string, raw: string) => {
    const msg = parseInvalidation(raw);
    if (msg === undefined) {
      log.warn({ raw: raw.slice(0, 200) }, 'unknown invalidation message');
      return;
    }
    const done = (p: Promise<void>) => p.catch((err: unknown) => log.error({ err, msg }, 'cache reload failed'));
    switch (msg.kind) {
      case 'token': targets.token(msg.id); break;
      case 'user': targets.user(msg.id); break;
      case 'channel': done(targets.channels()); break;
      case 'options': done(targets.options()); break;
      case 'channel_aside': targets.channelAside(msg.id, msg.ms, msg.from); break;
    }
  });
  await sub.subscribe(channel);
}
