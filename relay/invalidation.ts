// Applies the console's change announcements (pub/sub on keys.invalidationChannel()) to the relay's
// caches. Message shapes: {kind:'token', id}, {kind:'user', id}, {kind:'channel'}, {kind:'options'}.
import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger.js';

export interface InvalidationTargets {
  token(id: number): void;
  user(id: number): void;
  channels(): Promise<void>;
  options(): Promise<void>;
}

export async function subscribeInvalidations(sub: Redis, channel: string, targets: InvalidationTargets, log: Logger): Promise<void> {
  sub.on('message', (_ch: string, raw: string) => {
    let msg: { kind?: string; id?: number };
    try {
      msg = JSON.parse(raw) as { kind?: string; id?: number };
    } catch {
      return;
    }
    const done = (p: Promise<void>) => p.catch((err: unknown) => log.error({ err, msg }, 'cache reload failed'));
    switch (msg.kind) {
      case 'token': if (typeof msg.id === 'number') targets.token(msg.id); break;
      case 'user': if (typeof msg.id === 'number') targets.user(msg.id); break;
      case 'channel': done(targets.channels()); break;
      case 'options': done(targets.options()); break;
      default: log.warn({ msg }, 'unknown invalidation message');
    }
  });
  await sub.subscribe(channel);
}
