// The allow_ips field: IP addresses and CIDR blocks separated by commas, spaces or new lines.
// Stored normalised as a comma-separated list (null when empty), so readers split on ','.
import { isIP } from 'node:net';

export function splitIpList(raw: string): string[] {
  return raw.split(/[\s,]+/).filter((s) => s.length > 0);
}

export function isIpOrCidr(entry: string): boolean {
  const slash = entry.indexOf('/');
  if (slash === -1) return isIP(entry) !== 0;
  const version = isIP(entry.slice(0, slash));
  const prefix = entry.slice(slash + 1);
  if (version === 0 || !/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (version === 4 ? 32 : 128);
}

/** The first entry that is neither an IP nor a CIDR block, or undefined when all are valid. */
export function firstInvalidIp(raw: string): string | undefined {
  return splitIpList(raw).find((e) => !isIpOrCidr(e));
}

export function normaliseIpList(raw: string | null | undefined): string | null {
  if (raw === null || raw === undefined) return null;
  const entries = splitIpList(raw);
  return entries.length === 0 ? null : entries.join(',');
}
