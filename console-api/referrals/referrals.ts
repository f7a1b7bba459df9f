// Referrals (new-api's): an account registered with another's invitation code (aff_code) counts in the
// inviter's aff_count; the option QuotaForInviter adds to the inviter's referral quota (aff_quota and
// aff_history_quota, not the balance), QuotaForInvitee to the new account's balance; the inviter
// moves referral quota to its balance with POST /api/user/aff_transfer (at least AffTransferMinQuota).
//
// Every movement is a console credit (ledger/console-ledger.ts): its ledger row (with aff_quota_delta
// for the referral quota), its log row and the Redis mirror moved once after COMMIT, retried by the
// billing worker's follow-up like any other credit. Log types: 1 (top-up) for what reaches a balance
// (the invitee's reward, a transfer), 3 (management) for the inviter's reward, which moves only
// aff_quota, so that Σ type-1 rows is what was added to balances and a reward is not counted twice
// when it is later transferred. Request ids make each movement happen once: `aff-inviter:<invitee
// id>`, `aff-invitee:<invitee id>`, `aff-transfer:<uuid>`.
import { randomUUID } from 'node:crypto';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import type { UserRow } from '../accounts/account-view.js';
import { ACCOUNT_STATUS } from '../accounts/roles.js';
import type { Db } from '../db.js';
import { ConsoleError } from '../http/errors.js';
import { creditTransaction, recordConsoleCredit, type RecordedCredit } from '../ledger/console-ledger.js';
import type { ConsoleContext } from '../context.js';

export interface ReferralRewards {
  /** QuotaForInviter: to the inviter's aff_quota. */
  inviter: number;
  /** QuotaForInvitee: to the new account's balance. */
  invitee: number;
}

export const AFF_CODE_MAX_LENGTH = 32;

/**
 * Inside the registration's transaction, after the new account is inserted: finds the inviter by its
 * code, counts the invitation and records the rewards. The inviter's row is locked by the count's
 * UPDATE, so registrations using one code at the same time are counted one after the other, exactly.
 * Refuses an unknown code, the code of an account that is not enabled (a banned account earns no
 * reward), and a self-invitation (the code's owner has the new account's e-mail, or the
 * address the registration gave, which is not kept unverified; or is the account presenting its own
 * session). Returns the credits to finish after COMMIT.
 */
export async function acceptInvitation(
  tx: Db,
  invitee: UserRow,
  affCode: string,
  rewards: ReferralRewards,
  nowSec: number,
  callerId?: number,
  givenEmail = '',
): Promise<RecordedCredit[]> {
  const [inviter] = await tx<{ id: number; email: string }[]>`
    SELECT id, email FROM users WHERE aff_code = ${affCode} AND deleted_at IS NULL AND status = ${ACCOUNT_STATUS.enabled}`;
  if (!inviter) throw new ConsoleError('VALIDATION_FAILED', 'aff_code: unknown invitation code');
  const inviterAddress = inviter.email.toLowerCase();
  const sameAddress = inviterAddress !== '' && (inviterAddress === invitee.email.toLowerCase() || inviterAddress === givenEmail.trim().toLowerCase());
  if (Number(inviter.id) === Number(invitee.id) || sameAddress || (callerId !== undefined && callerId === Number(inviter.id))) {
    throw new ConsoleError('VALIDATION_FAILED', 'aff_code: an account cannot invite itself');
  }
  await tx`UPDATE users SET aff_count = aff_count + 1 WHERE id = ${inviter.id}`;
  await tx`UPDATE users SET inviter_id = ${inviter.id} WHERE id = ${invitee.id}`;
  const credits: RecordedCredit[] = [];
  if (rewards.inviter > 0) {
    const c = await recordConsoleCredit(tx, {
      requestId: `aff-inviter:${invitee.id}`, type: LOG_TYPE.manage, userId: Number(inviter.id), delta: 0, affDelta: rewards.inviter,
      content: `referral reward: an account registered with your invitation code; +${rewards.inviter} referral quota (aff_quota, not the balance)`,
      createdAt: nowSec,
    });
    if (c) credits.push(c);
  }
  if (rewards.invitee > 0) {
    const c = await recordConsoleCredit(tx, {
      requestId: `aff-invitee:${invitee.id}`, type: LOG_TYPE.topup, userId: Number(invitee.id), delta: rewards.invitee,
      content: `invitation reward: registered with an invitation code; +${rewards.invitee} quota`,
      createdAt: nowSec,
    });
    if (c) credits.push(c);
  }
  return credits;
}

/**
 * Inside the transaction that created `account` by registration or sign-on: QuotaForNewUser to its
 * balance, a console credit as every other (its ledger row, a top-up log row, the mirror moved after
 * COMMIT), once per account (`new-account:<id>`). Returns the credit to finish after COMMIT, if any.
 */
export async function creditNewAccount(tx: Db, account: UserRow, amount: number, nowSec: number): Promise<RecordedCredit[]> {
  if (amount <= 0) return [];
  const c = await recordConsoleCredit(tx, {
    requestId: `new-account:${account.id}`, type: LOG_TYPE.topup, userId: Number(account.id), delta: amount,
    content: `welcome credit for a new account: +${amount} quota`,
    createdAt: nowSec,
  });
  return c ? [c] : [];
}

/**
 * Moves `amount` of the account's referral quota to its balance, in one transaction with the account
 * row locked: at least `minimum`, at most aff_quota. Returns the credit to finish after COMMIT.
 */
export async function transferAffQuota(ctx: ConsoleContext, userId: number, amount: number, minimum: number): Promise<RecordedCredit> {
  if (amount < minimum) throw new ConsoleError('VALIDATION_FAILED', `quota: the smallest transfer is ${minimum} quota`);
  return creditTransaction(ctx, async (tx) => {
    const [row] = await tx<{ aff_quota: number }[]>`
      SELECT aff_quota FROM users WHERE id = ${userId} AND deleted_at IS NULL FOR UPDATE`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'account not found');
    if (Number(row.aff_quota) < amount) {
      throw new ConsoleError('VALIDATION_FAILED', `quota: exceeds the referral quota available (${row.aff_quota} quota)`);
    }
    const c = await recordConsoleCredit(tx, {
      requestId: `aff-transfer:${randomUUID()}`, type: LOG_TYPE.topup, userId, delta: amount, affDelta: -amount,
      content: `referral quota transferred to the balance: +${amount} quota (aff_quota −${amount})`,
      createdAt: ctx.now(),
    });
    return c!;
  });
}
