// What a prompt count takes before it runs, for count_tokens (count-tokens-handler.ts) and for a
// reservation the byte bound could not cover (messages-handler.ts countForReservation): a place in the
// counting queue first, then one of the key's counts of the minute. In that order a count the relay
// refuses for its queue (529) spends none of the key's budget, nor makes the calls beside it 429.
// An account holding COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT places already, all its keys together, is
// refused first (429, accountBusyError), so that one account's large counts cannot hold the queue for
// every other: per key, a probe's 8 keys of one account made another's count of a line wait 32 s.
import { RelayError } from '../errors.js';
import type { ApiKeyRecord } from '../auth/key-directory.js';
import type { QuotaStore } from '../../core/quota/quota-store.js';
import type { PromptPlace, TokenCounter } from '../token-count/token-counter.js';

/**
 * The place to count in, or why there is none: the account holds its most places already, the queue
 * is full, or the key's counts of the minute are spent.
 */
export async function takeCountPlace(
  tokens: Pick<TokenCounter, 'takePromptPlace'>, quota: Pick<QuotaStore, 'takeCountSlot'>,
  record: Pick<ApiKeyRecord, 'userId' | 'tokenId'>, perMinute: number, minute: number,
): Promise<PromptPlace | 'queue_full' | 'budget_spent' | 'account_busy'> {
  const place = tokens.takePromptPlace(record.userId);
  if (place === 'owner_busy') return 'account_busy';
  if (place === null) return 'queue_full';
  let taken: boolean;
  try {
    taken = await quota.takeCountSlot(record.userId, record.tokenId, perMinute, minute);
  } catch (err) {
    place.release();
    throw err;
  }
  if (taken) return place;
  place.release();
  return 'budget_spent';
}

/** The 429 of an account whose counts are all in flight: one ends within seconds. */
export function accountBusyError(perAccount: number): RelayError {
  return new RelayError('rate_limited', `This account has ${perAccount} token count${perAccount === 1 ? '' : 's'} running already; retry when one has ended.`);
}

/** Retry-After of accountBusyError. */
export const ACCOUNT_BUSY_RETRY_AFTER = '1';
