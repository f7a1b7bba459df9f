// The Lua scripts' return codes and what they mean to QuotaStore's callers, in one table. The relay
// turns the refusals into its HTTP answers in one place too (relay/errors.ts RESERVE_REFUSAL_ERRORS).

/** What the Lua scripts return; negative codes are failures (BullMQ's convention). */
export enum QuotaScriptCode {
  Ok = 1,
  BalanceNotLoaded = -1,
  TokenQuotaNotLoaded = -2,
  InsufficientBalance = -3,
  InsufficientTokenQuota = -4,
  DuplicateReservation = -5,
  NoSuchReservation = -6,
  RequestRateLimited = -7,
  TokenRateLimited = -8,
  DeadlineRenewed = -9,
  /** settleSliceDraws-4n.lua: settled against the balance, as the reaper had released the request's slice. */
  SettledAgainstBalance = 2,
}

export type ReserveOutcome =
  | 'reserved' | 'insufficient_balance' | 'insufficient_token_quota' | 'duplicate' | 'rpm_limited' | 'tpm_limited';

export type ReserveRefusal = Exclude<ReserveOutcome, 'reserved'>;

/**
 * reserveQuota-8.lua's final answers. BalanceNotLoaded and TokenQuotaNotLoaded are not among them:
 * QuotaStore seeds the missing mirror from Postgres and asks again.
 */
export const RESERVE_OUTCOME_OF_CODE: ReadonlyMap<number, ReserveOutcome> = new Map<QuotaScriptCode, ReserveOutcome>([
  [QuotaScriptCode.Ok, 'reserved'],
  [QuotaScriptCode.InsufficientBalance, 'insufficient_balance'],
  [QuotaScriptCode.InsufficientTokenQuota, 'insufficient_token_quota'],
  [QuotaScriptCode.DuplicateReservation, 'duplicate'],
  [QuotaScriptCode.RequestRateLimited, 'rpm_limited'],
  [QuotaScriptCode.TokenRateLimited, 'tpm_limited'],
]);
