// The rules an API key carries, checked on every request before any quota moves.
import { BlockList, isIP } from 'node:net';
import type { RelayErrorCode } from '../errors.js';
import type { ApiKeyRecord } from './key-directory.js';

export const TOKEN_STATUS = { enabled: 1, disabled: 2, expired: 3, exhausted: 4 } as const;
export const USER_STATUS = { enabled: 1, banned: 2 } as const;

const allowListCache = new WeakMap<ApiKeyRecord, BlockList>();

/** Parses `allow_ips` (comma or newline separated addresses and CIDR ranges, IPv4 and IPv6). */
export function compileAllowList(spec: string): BlockList {
  const list = new BlockList();
  for (const raw of spec.split(/[,\s]+/)) {
    const entry = raw.trim();
    if (!entry) continue;
    const slash = entry.indexOf('/');
    const addr = slash < 0 ? entry : entry.slice(0, slash);
    const family = isIP(addr);
    if (family === 0) continue;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (slash < 0) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(entry.slice(slash + 1)), type);
  }
  return list;
}

export function ipAllowed(record: ApiKeyRecord, ip: string): boolean {
  if (!record.allowIps) return true;
  let list = allowListCache.get(record);
  if (!list) {
    list = compileAllowList(record.allowIps);
    allowListCache.set(record, list);
  }
  const family = isIP(ip);
  if (family === 0) return false;
  if (list.check(ip, family === 4 ? 'ipv4' : 'ipv6')) return true;
  // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
  if (family === 6 && ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4) return list.check(ip.slice(7), 'ipv4');
  return false;
}

/** The first rule the request breaks, or null. `nowSec` is Unix seconds. */
export function checkKeyRules(record: ApiKeyRecord, model: string, ip: string, nowSec: number): RelayErrorCode | null {
  if (record.userStatus !== USER_STATUS.enabled) return 'account_banned';
  if (record.status === TOKEN_STATUS.expired) return 'key_expired';
  if (record.status === TOKEN_STATUS.exhausted) return 'insufficient_key_quota';
  if (record.status !== TOKEN_STATUS.enabled) return 'key_disabled';
  if (record.expiredTime !== -1 && record.expiredTime <= nowSec) return 'key_expired';
  if (record.modelLimits !== null && !record.modelLimits.has(model)) return 'model_not_allowed';
  if (!ipAllowed(record, ip)) return 'ip_not_allowed';
  return null;
}
