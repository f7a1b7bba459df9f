// Display rules shared by the pages. 500000 quota = 1 US dollar (the contract).
export const QUOTA_PER_DOLLAR = 500_000;

export function dollars(quota: number): string {
  const d = quota / QUOTA_PER_DOLLAR;
  const digits = Math.abs(d) >= 100 ? 2 : Math.abs(d) >= 1 ? 3 : 4;
  return `$${d.toFixed(digits)}`;
}

/** "1,234,567 ($2.469)" */
export function quotaText(quota: number): string {
  return `${quota.toLocaleString('en-US')} (${dollars(quota)})`;
}

export function dateTime(unixSec: number): string {
  if (!unixSec) return '—';
  const d = new Date(unixSec * 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A datetime-local input's value as Unix seconds; undefined when empty or invalid. */
export function fromLocalInput(value: string): number | undefined {
  if (!value) return undefined;
  const ms = new Date(value).getTime();
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : undefined;
}

/** Unix seconds as a datetime-local input's value (local time, minutes). */
export function toLocalInput(unixSec: number): string {
  if (unixSec <= 0) return '';
  const d = new Date(unixSec * 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** "sk-abcd…wxyz": what stays on screen once a key has been shown. */
export function maskKey(key: string): string {
  if (key.length <= 12) return key.replace(/./g, '•');
  return `${key.slice(0, 7)}…${key.slice(-4)}`;
}

export const LOG_TYPES: Record<number, string> = { 1: 'Top-up', 2: 'Consumption', 3: 'Management', 4: 'System', 5: 'Error' };
export const ROLE_NAMES: Record<number, string> = { 1: 'User', 10: 'Administrator', 100: 'Root' };
export const ROLE = { user: 1, admin: 10, root: 100 } as const;
