// Display rules shared by the pages. 500000 quota = 1 US dollar (the contract).
export const QUOTA_PER_DOLLAR = 500_000;

/** "1234567.5" as "1,234,567.5". */
function groupThousands(text: string): string {
  const [whole = '', fraction] = text.split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return fraction === undefined ? grouped : `${grouped}.${fraction}`;
}

/** A count (requests, tokens, rows, quota units) with its thousands grouped: 58662 as "58,662". */
export function count(n: number): string {
  return Number.isSafeInteger(n) ? groupThousands(String(n)) : n.toLocaleString('en-US');
}

/**
 * A log entry's details as console-api writes them, with the quota figures in them grouped as the
 * rest of the console shows numbers: "added 2500000 quota" as "added 2,500,000 quota", "set the
 * balance from 1000000 to 2500000 (+1500000 quota)", "(aff_quota −5000000)". Only those figures:
 * a code's name, an order number or a model's date stay as written.
 */
export function logDetails(content: string): string {
  return content
    .replace(/(?<![\w.,])(\d{4,})(?= (?:referral )?quota\b)/g, (_m, d: string) => groupThousands(d))
    .replace(/(\(aff_quota [−-])(\d{4,})\)/g, (_m, head: string, d: string) => `${head}${groupThousands(d)})`)
    .replace(/\bset the balance from (-?)(\d+) to (-?)(\d+) \(/g,
      (_m, s1: string, a: string, s2: string, b: string) => `set the balance from ${s1}${groupThousands(a)} to ${s2}${groupThousands(b)} (`);
}

/**
 * Quota as US dollars, exactly: 1 quota is $0.000002, so six decimals hold any amount and none is
 * rounded (a balance of $99.999606 never reads $100.00, a charge of $0.000078 never $0.0001). Trailing
 * zeros go, down to two decimals: "$100.00", "$4.999684", "-$0.000078", "$1,234.57". The sign comes
 * before the $; with `sign`, a positive amount gets "+" (a credit in a list of charges). Computed on
 * integers: a float would lose the last decimals of an amount past $1e9.
 */
export function dollars(quota: number, opts: { sign?: boolean } = {}): string {
  const { whole, micros } = dollarDigits(quota);
  const fraction = micros.replace(/0{1,4}$/, '');
  const sign = quota <= -1 ? '-' : opts.sign && quota >= 1 ? '+' : '';
  return `${sign}$${groupThousands(`${whole}.${fraction}`)}`;
}

/** The whole dollars and the six decimals of |quota|, on integers (dollars(), dollarsInput()). */
function dollarDigits(quota: number): { whole: number; micros: string } {
  const q = Math.abs(Math.trunc(quota));
  const rest = q % QUOTA_PER_DOLLAR;
  return { whole: (q - rest) / QUOTA_PER_DOLLAR, micros: String(rest * (1_000_000 / QUOTA_PER_DOLLAR)).padStart(6, '0') };
}

/** Money of a payment (in the provider's currency): two decimals, thousands grouped: "1,234.50". */
export function money(amount: number): string {
  const text = Math.abs(amount).toFixed(2);
  return `${amount < 0 && Number(text) !== 0 ? '-' : ''}${groupThousands(text)}`;
}

/** A top-up quantity (units of 1 US dollar of credit) as credit, as dollars() writes it: "$20.00". */
export function creditDollars(amount: number): string {
  return dollars(Math.round(amount * QUOTA_PER_DOLLAR));
}

/**
 * A price coefficient (AmountDiscount: 0.95 multiplies the price) as people read it: "5% off"; a
 * coefficient above 1 is a surcharge ("10% more"); 1 is no discount ('').
 */
export function discountText(coefficient: number): string {
  if (!Number.isFinite(coefficient) || coefficient === 1) return '';
  const percent = Number((Math.abs(1 - coefficient) * 100).toFixed(1));
  if (percent === 0) return '';
  return coefficient < 1 ? `${percent}% off` : `${percent}% more`;
}

const DOLLAR_TEXT = /^([+-])?\$?(\d+(\.\d*)?|\.\d+)$/;

/** The smallest amount of quota, 1 unit, as the forms name it. */
export const ONE_QUOTA_DOLLARS = '$0.000002';

/**
 * A dollar amount typed in a form as quota, or undefined when it is not one: digits with an optional
 * decimal point (and an optional "$"); no hexadecimal, exponent, thousands separator or blank. A
 * minus sign only when `negative` allows it. An amount that is not zero but below half a quota unit
 * is not one either: it would be saved as $0 (a balance emptied, a credit of nothing) as if it had
 * been taken; dollarsError() says why.
 */
export function dollarsToQuota(text: string, opts: { negative?: boolean } = {}): number | undefined {
  const typed = readDollars(text);
  if (typed === undefined || typed.problem !== undefined || (typed.negative && !opts.negative)) return undefined;
  const quota = Number(typed.quota);
  return typed.negative && quota !== 0 ? -quota : quota;
}

const QUOTA_PER_DOLLAR_BIG = BigInt(QUOTA_PER_DOLLAR);
const MAX_QUOTA_BIG = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A dollar field's text read exactly (dollarsToQuota() and dollarsError() apply the same rules):
 * undefined when it is not written as an amount; `problem` when the amount cannot be stored, above the
 * largest quota or, not zero, below half a unit (saved as $0).
 */
function readDollars(text: string): { negative: boolean; quota: bigint; problem?: 'above_max' | 'below_unit' } | undefined {
  const m = DOLLAR_TEXT.exec(text.trim());
  if (!m) return undefined;
  const quota = exactQuota(m[2]!);
  const problem = quota > MAX_QUOTA_BIG ? 'above_max' : quota === 0n && /[1-9]/.test(m[2]!) ? 'below_unit' : undefined;
  return problem === undefined ? { negative: m[1] === '-', quota } : { negative: m[1] === '-', quota, problem };
}

/**
 * The quota a dollar amount's digits ("12.5", ".5", "3.") name, a half unit rounded up, computed on
 * integers: through a float, $17,465,489,038.543814 was saved 1 quota off, and the largest balance,
 * typed back as the console shows it, read as above the largest.
 */
function exactQuota(digits: string): bigint {
  const [whole = '', fraction = ''] = digits.split('.');
  const quota = (whole === '' ? 0n : BigInt(whole)) * QUOTA_PER_DOLLAR_BIG;
  if (fraction === '') return quota;
  const scale = 10n ** BigInt(fraction.length);
  return quota + (BigInt(fraction) * QUOTA_PER_DOLLAR_BIG * 2n + scale) / (2n * scale);
}

/**
 * Quota as a form's dollar field holds it: exact (six decimals at most, trailing zeros dropped), no
 * "$" nor grouping: 18014398509.481982 where String(quota / 500000) wrote 18014398509.481983.
 */
export function dollarsInput(quota: number): string {
  const { whole, micros } = dollarDigits(quota);
  const fraction = micros.replace(/0+$/, '');
  return `${quota <= -1 ? '-' : ''}${whole}${fraction === '' ? '' : `.${fraction}`}`;
}

/** The largest quota the API stores (its safeInt: a JSON safe integer), $18,014,398,509.481982. */
export const MAX_QUOTA = Number.MAX_SAFE_INTEGER;

/** The amount a dollar field's text names, however large, or undefined when it is not written as one. */
export function typedDollars(text: string): number | undefined {
  const m = DOLLAR_TEXT.exec(text.trim());
  return m ? Number(m[2]) : undefined;
}

/**
 * The error of a dollar field whose text dollarsToQuota() refused: `usual` (what the field takes), or
 * what is wrong with an amount written as one: below the smallest unit ("a dollar amount above $0"
 * would puzzle whoever typed 0.0000001), or above the largest the API stores, named.
 */
export function dollarsError(text: string, usual: string): string {
  switch (readDollars(text)?.problem) {
    case 'above_max': return `must be at most ${dollars(MAX_QUOTA)}`;
    case 'below_unit': return `below ${ONE_QUOTA_DOLLARS} (1 quota), the smallest amount: it would be saved as $0`;
    default: return usual;
  }
}

/**
 * A number as an input shows it: 0.0000001 as "0.0000001", not "1e-7" (which the form would send back
 * as typed, and a person reads as a code); integers and ordinary decimals as String() writes them.
 */
export function inputNumber(n: number): string {
  const text = String(n);
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (!m) return text;
  // String()'s own digits moved by its exponent: the shortest digits that read back as n, no noise.
  const [, sign, lead, rest = '', exp] = m;
  const digits = lead! + rest;
  const point = 1 + Number(exp);
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  return `${sign}${digits.padEnd(point, '0')}`;
}

/** "1,234,567 quota": the units themselves. */
export function quotaUnits(quota: number): string {
  return `${count(quota)} quota`;
}

/** "$2.469134 (1,234,567 quota)": the dollars, and the quota units named as such. */
export function quotaText(quota: number): string {
  return `${dollars(quota)} (${quotaUnits(quota)})`;
}

export function dateTime(unixSec: number): string {
  if (!unixSec) return '—';
  const d = new Date(unixSec * 1000);
  // Beyond what Date holds (a time stored before the API bounded it to 9999-12-31): the number, not "NaN-NaN-NaN".
  if (!Number.isFinite(d.getTime())) return String(unixSec);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** Minutes east of UTC of the browser's time zone at an instant: that day's own, as daylight saving moves it. */
export function localOffset(ms: number): number {
  return -new Date(ms).getTimezoneOffset();
}

/** A local day: where it starts, and the fixed UTC offset whose midnight falls there. */
export interface LocalDay {
  /** Unix seconds of the day's first instant: its midnight, or the hour after a midnight the clocks skip. */
  start: number;
  /** Minutes east of UTC: the offset by which /api/log/self/daily starts this day at `start`. */
  utcOffset: number;
}

/**
 * The `days` local days ending with today, oldest first, each with its own UTC offset. Today's offset
 * is not that of a day before a daylight-saving change: applied to every day, it put those days an
 * hour off their midnights (in spring, each one labelled 23:00 of the day before). `offsetAt` is the
 * time zone (minutes east of UTC at an instant): the browser's, or any other for a test.
 */
export function localDays(nowMs: number, days: number, offsetAt: (ms: number) => number = localOffset): LocalDay[] {
  const MINUTE = 60_000;
  const DAY = 86_400_000;
  const dateOf = (ms: number) => Math.floor((ms + offsetAt(ms) * MINUTE) / DAY);
  const today = dateOf(nowMs);
  const out: LocalDay[] = [];
  for (let date = today - days + 1; date <= today; date++) {
    // The date's midnight read as UTC, less the offset in force then. Which one that is may change
    // within a day of it, so each offset in force near it is tried: the day starts at the earliest
    // instant that is already this date (a midnight the clocks skip starts the day at 01:00; one they
    // repeat, at the first of the two).
    const wall = date * DAY;
    let start = Infinity;
    for (const o of new Set([-DAY, -DAY / 2, 0, DAY / 2, DAY].map((dt) => offsetAt(wall + dt)))) {
      const t = wall - o * MINUTE;
      if (dateOf(t) === date && t < start) start = t;
    }
    if (start === Infinity) start = wall - offsetAt(wall) * MINUTE;
    out.push({ start: Math.round(start / 1000), utcOffset: Math.round((wall - start) / MINUTE) });
  }
  return out;
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
  if (!Number.isFinite(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** "sk-abcd…wxyz": what stays on screen once a key has been shown. */
export function maskKey(key: string): string {
  if (key.length <= 12) return key.replace(/./g, '•');
  return `${key.slice(0, 7)}…${key.slice(-4)}`;
}

export const LOG_TYPE = { topup: 1, consume: 2, manage: 3, system: 4, error: 5 } as const;
export const LOG_TYPES: Record<number, string> = { 1: 'Top-up', 2: 'Consumption', 3: 'Management', 4: 'System', 5: 'Error' };
export const ROLE_NAMES: Record<number, string> = { 1: 'User', 10: 'Administrator', 100: 'Root' };
export const ROLE = { user: 1, admin: 10, root: 100 } as const;

/** An amount the API gives in quota units. */
const QUOTA_AMOUNT = /\b(-?\d{1,16}) quota\b/g;

const NEGATIVE_BALANCE = /^(.*)would make the balance negative \(spendable (-?\d+), Postgres (-?\d+)\)(.*)$/s;

/**
 * The API's messages as the console's readers read them: an amount in quota units ("500000 quota")
 * becomes dollars, as the fields they are about are typed in dollars (a bare 500000 under "Referral
 * quota to move (US dollars)" read as $500,000), and the API's inner words go ("spendable 50229816,
 * Postgres 50229816": the relay's mirror and the database's figure). Any other message is returned
 * as it is.
 */
export function readableMessage(message: string): string {
  const m = NEGATIVE_BALANCE.exec(message);
  if (m) {
    const spendable = Number(m[2]);
    return `${m[1]}would make the balance negative: ${dollars(Math.max(0, spendable))} can be spent now, so at most that much can be removed${m[4]}`;
  }
  return message.replace(QUOTA_AMOUNT, (_all, n: string) => dollars(Number(n)));
}

