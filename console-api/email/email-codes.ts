// One-time codes sent by e-mail: binding an address to an account, registering with a verified address
// (EmailVerificationEnabled), resetting a forgotten password. A code is 6 digits for a person to type
// (a reset code 32 hex characters, as it also travels in a link), valid EMAIL_CODE_TTL_SEC, used once,
// and dead after EMAIL_CODE_MAX_ATTEMPTS tries. Only an HMAC (the server's KEY_SECRET) of
// purpose, address and code is stored (email_codes, migration 012): a database dump holds no usable
// code, and the code never reaches a log (it travels in request bodies, never in a URL).
//
// Rate limits, counted on the same rows under a transaction-scoped advisory lock so that parallel
// requests are counted one after the other: per address EMAIL_CODES_PER_ADDRESS, per account
// EMAIL_CODES_PER_ACCOUNT and per client address EMAIL_CODES_PER_CLIENT, each per hour. Reset codes
// and the other purposes have budgets of their own per address and per account (the client's is
// shared): an anonymous caller asking for a victim's address with GET /api/verification (a 409 row)
// or for its reset codes neither spends the other kind's budget nor the account's binding codes.
//
// Reset codes are anybody's to ask for (GET /api/reset_password is public), so a new one does not end
// the address's earlier open ones: every one was mailed to the owner, each stays valid until used or
// expired, and using one ends them all (auth/sessions.ts endResetCodes, with every other credential).
// Otherwise any stranger could kill the code in the owner's hands with one request. Nor are tries of a
// reset code counted (claimEmailCode): its 128 random bits cannot be guessed however many tries are
// made, and counted (per code or per address), five strangers' wrong tries ended the codes in the
// owner's mailbox. A stranger can still spend the address's 5 reset codes of the hour (the
// mail-bombing bound), but not the codes already in the owner's mailbox. The 6-digit codes' tries are
// counted per address: a try counts against every open code of the purpose and address (a binding
// code's, of the caller's account only). A binding or registration code still ends the earlier one of
// its purpose, address and account (the new 6-digit code is the one to type); another account's
// binding codes for the address stay.
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { loadSmtpSettings, sendMail, type SmtpSettings } from '../../core/email/mailer.js';
import type { ConsoleContext } from '../context.js';
import type { UserRow } from '../accounts/account-view.js';
import type { Db } from '../db.js';
import { ConsoleError } from '../http/errors.js';

export type CodePurpose = 'bind' | 'register' | 'reset';

export const EMAIL_CODE_TTL_SEC = 600;
export const EMAIL_CODE_MAX_ATTEMPTS = 5;
export const EMAIL_CODE_WINDOW_SEC = 3600;
export const EMAIL_CODES_PER_ADDRESS = 5;
export const EMAIL_CODES_PER_ACCOUNT = 5;
export const EMAIL_CODES_PER_CLIENT = 20;

/** Addresses compare without case; stored as given but looked up lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * One address, one account: every writer of users.email (a binding, a registration with a verified
 * address, an account created by sign-on) takes this transaction-scoped lock on the address before it
 * checks the address is free (findUserByEmail) and holds it to its commit. Two writers of one address
 * then check one after the other, and the second sees the first's account (409). Taken before any row
 * lock of the writer's transaction, so that the writers' locks are always taken in one order.
 */
export async function lockEmailAddress(tx: Db, address: string): Promise<void> {
  await tx`SELECT pg_advisory_xact_lock(hashtext(${`email:${normalizeEmail(address)}`}))`;
}

/** The live account that holds this address (the lowest id), other than `exceptId`; undefined when none. */
export async function findUserByEmail(db: Db, address: string, exceptId = 0): Promise<UserRow | undefined> {
  const [row] = await db<UserRow[]>`
    SELECT * FROM users WHERE lower(email) = ${normalizeEmail(address)} AND id <> ${exceptId} AND deleted_at IS NULL ORDER BY id LIMIT 1`;
  return row;
}

function codeHash(ctx: ConsoleContext, purpose: CodePurpose, email: string, code: string): Buffer {
  return createHmac('sha256', ctx.config.KEY_SECRET).update(`email-code\0${purpose}\0${email}\0${code}`).digest();
}

function newCode(purpose: CodePurpose): string {
  return purpose === 'reset' ? randomBytes(16).toString('hex') : String(randomInt(0, 1_000_000)).padStart(6, '0');
}

export interface IssueCode {
  purpose: CodePurpose;
  email: string;
  /** The account the code is for (bind: the caller; reset: the address's owner); 0 for registration. */
  userId: number;
  clientIp: string;
  /**
   * Count the request only: a row is written, used already (never mailed, never accepted), and the
   * open codes are left as they are. For a request answered without a code (an address taken).
   */
  countOnly?: boolean;
}

/**
 * Counts the request against the limits, stores the code's HMAC and returns the code (to be mailed,
 * never logged). Earlier open binding or registration codes of the same purpose and address stop
 * working; earlier reset codes stay valid (see the top of this file).
 */
export async function issueEmailCode(ctx: ConsoleContext, r: IssueCode): Promise<string> {
  const email = normalizeEmail(r.email);
  const code = newCode(r.purpose);
  const now = ctx.now();
  const since = now - EMAIL_CODE_WINDOW_SEC;
  await ctx.sql.begin(async (tx) => {
    // The count and the insert of two parallel requests sharing a client address, an account or an
    // address do not interleave; the locks are always taken in this order, so two requests never wait
    // on each other crosswise.
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`email-code-client:${r.clientIp}`}))`;
    if (r.userId !== 0) await tx`SELECT pg_advisory_xact_lock(hashtext(${`email-code-account:${r.userId}`}))`;
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`email-code:${email}`}))`;
    // The address's and the account's budgets: reset codes apart from the other purposes.
    const reset = r.purpose === 'reset';
    const [counts] = await tx<{ address: number; account: number; client: number }[]>`
      SELECT
        (SELECT count(*) FROM email_codes WHERE email = ${email} AND created_at > ${since}
           AND (purpose = 'reset') = ${reset})::int AS address,
        (SELECT count(*) FROM email_codes WHERE ${r.userId} <> 0 AND user_id = ${r.userId} AND created_at > ${since}
           AND (purpose = 'reset') = ${reset})::int AS account,
        (SELECT count(*) FROM email_codes WHERE client_ip = ${r.clientIp} AND created_at > ${since})::int AS client`;
    const limited = counts!.address >= EMAIL_CODES_PER_ADDRESS ? 'this address'
      : counts!.account >= EMAIL_CODES_PER_ACCOUNT ? 'this account'
      : counts!.client >= EMAIL_CODES_PER_CLIENT ? 'this client address' : undefined;
    if (limited) {
      throw new ConsoleError('RATE_LIMITED', `too many verification e-mails for ${limited}; retry later`, { retryAfterSec: EMAIL_CODE_WINDOW_SEC });
    }
    // The new code replaces the earlier one of its purpose and address for the same account (0 for a
    // registration): another account asking a binding code for the address ended this one's.
    if (!r.countOnly && !reset) await tx`UPDATE email_codes SET used_at = ${now} WHERE purpose = ${r.purpose} AND email = ${email} AND user_id = ${r.userId} AND used_at IS NULL`;
    // Rows older than a day count for nothing: the address's are dropped as it asks again.
    await tx`DELETE FROM email_codes WHERE email = ${email} AND created_at < ${now - 86_400}`;
    await tx`
      INSERT INTO email_codes (purpose, email, user_id, client_ip, code_hash, created_at, expires_at, used_at)
      VALUES (${r.purpose}, ${email}, ${r.userId}, ${r.clientIp}, ${codeHash(ctx, r.purpose, email, code)}, ${now}, ${now + EMAIL_CODE_TTL_SEC},
        ${r.countOnly ? now : null})`;
  });
  return code;
}

/** A code that matched one of its address's open codes; used by useEmailCode in the transaction of what it allows. */
export interface EmailCodeClaim {
  id: number;
  /** The account the code was issued for (0 for registration). */
  userId: number;
}

/**
 * Checks a code, before the caller's transaction: every try of a 6-digit code, right or wrong, first
 * takes one of EMAIL_CODE_MAX_ATTEMPTS from every open code of the purpose and address (a reset code's
 * tries are not counted: see the header), in a statement of its own
 * that commits at once. So a wrong code stays counted though what it was for is never done; tries in
 * parallel are counted one after the other (the rows' locks, taken in id order), never all compared
 * before any is counted; the tries are counted per address however many codes are open (reset codes:
 * several may be); and no transaction waits for a second pool connection (a pool full of such
 * transactions would wait forever). INVALID_CODE when the code is wrong, expired, used or out of tries.
 */
export async function claimEmailCode(ctx: ConsoleContext, purpose: CodePurpose, rawEmail: string, code: string, accountId = 0): Promise<EmailCodeClaim> {
  const email = normalizeEmail(rawEmail);
  const now = ctx.now();
  // A binding code is its account's (accountId: the signed-in caller): another account's wrong tries
  // for the same address spent the tries of the code the owner was about to type.
  const owner = purpose === 'bind' ? accountId : -1;
  // A reset code (128 random bits) cannot be guessed in any number of tries, and POST /api/user/reset
  // is anybody's to call: counted, five strangers' wrong tries ended the codes in the owner's mailbox.
  const rows = purpose === 'reset'
    ? await ctx.sql<{ id: number; user_id: number; code_hash: Buffer }[]>`
        SELECT id, user_id, code_hash FROM email_codes
        WHERE purpose = ${purpose} AND email = ${email} AND used_at IS NULL AND expires_at > ${now}`
    : await ctx.sql<{ id: number; user_id: number; code_hash: Buffer }[]>`
    UPDATE email_codes SET attempts = attempts + 1
    WHERE id IN (
      SELECT id FROM email_codes
      WHERE purpose = ${purpose} AND email = ${email} AND used_at IS NULL
        AND expires_at > ${now} AND attempts < ${EMAIL_CODE_MAX_ATTEMPTS} AND (${owner} = -1 OR user_id = ${owner})
      ORDER BY id FOR UPDATE)
      AND used_at IS NULL AND expires_at > ${now} AND attempts < ${EMAIL_CODE_MAX_ATTEMPTS}
    RETURNING id, user_id, code_hash`;
  const given = codeHash(ctx, purpose, email, code);
  let match: { id: number; user_id: number } | undefined;
  // Every open code compared, in constant time each.
  for (const row of rows) {
    if (row.code_hash.length === given.length && timingSafeEqual(row.code_hash, given)) match ??= row;
  }
  if (!match) throw new ConsoleError('INVALID_CODE');
  return { id: Number(match.id), userId: Number(match.user_id) };
}

/**
 * Uses a claimed code inside `tx`: the change the code allows commits with its use, or neither
 * happens. Returns the account the code was issued for; INVALID_CODE when a parallel request used it first.
 */
export async function useEmailCode(ctx: ConsoleContext, tx: Db, claim: EmailCodeClaim): Promise<number> {
  const [row] = await tx<{ user_id: number }[]>`
    UPDATE email_codes SET used_at = ${ctx.now()} WHERE id = ${claim.id} AND used_at IS NULL RETURNING user_id`;
  if (!row) throw new ConsoleError('INVALID_CODE');
  return Number(row.user_id);
}

/** Mails a code; EMAIL_NOT_CONFIGURED when SMTPServer is not set, UPSTREAM_FAILED when sending fails. */
export async function mailCode(ctx: ConsoleContext, to: string, subject: string, text: string, loaded?: SmtpSettings): Promise<void> {
  const smtp = loaded ?? await loadSmtpSettings(ctx.sql, ctx.optionSealer);
  if (!smtp) throw new ConsoleError('FEATURE_DISABLED', 'e-mail is not configured (SMTPServer)');
  try {
    await sendMail(smtp, { to, subject, text });
  } catch (err) {
    // The SMTP server's answer only: the message (and its code) stays out of the log.
    ctx.logger.warn({ smtpError: (err as Error).message, smtpHost: smtp.host }, 'sending a verification e-mail failed');
    throw new ConsoleError('UPSTREAM_FAILED', 'the e-mail could not be sent; retry later');
  }
}
