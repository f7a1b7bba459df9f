// The relay's lines that a provider's fault repeats for every request, written through the throttle
// (infra/log-throttle.ts): once per kind and channel in RELAY_REPEATED_LOG_INTERVAL_MS, the next with
// `heldBack`, how many were left out.
import { HELD_BACK, type LogThrottle } from '../../infra/log-throttle.js';
import type { Logger } from '../../infra/logger.js';

export interface RepeatedLogContext {
  log: Logger;
  /** Absent (unit tests): every line. */
  repeatedLog?: LogThrottle;
}

export function logRepeated(
  ctx: RepeatedLogContext, level: 'warn' | 'error', kind: string, channel: number | undefined, fields: Record<string, unknown>, msg: string,
): void {
  const heldBack = ctx.repeatedLog?.take(`${kind}:${channel ?? '-'}`) ?? 0;
  if (heldBack === HELD_BACK) return;
  fields.heldBack = heldBack;
  ctx.log[level](fields, msg);
}
