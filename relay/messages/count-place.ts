// What a prompt count takes before it runs, for count_tokens (count-tokens-handler.ts) and for a
// reservation the byte bound could not cover (messages-handler.ts countForReservation): a place in the
// counting queue first, then one of the key's counts of the minute. In that order a count the relay
// refuses for its queue (529) spends none of the key's budget, nor makes the calls beside it 429.
import type { ApiKeyRecord } from '../auth/key-directory.js';
import type { QuotaStore } from '../../core/quota/quota-store.js';
import type { PromptPlace, TokenCounter } from '../token-count/token-counter.js';

/** The place to count in, or why there is none: the queue is full, or the key's counts of the minute are spent. */
export async function takeCountPlace(
  tokens: Pick<TokenCounter, 'takePromptPlace'>, quota: Pick<QuotaStore, 'takeCountSlot'>,
  record: Pick<ApiKeyRecord, 'userId' | 'tokenId'>, perMinute: number, minute: number,
): Promise<PromptPlace | 'queue_full' | 'budget_spent'> {
  const place = tokens.takePromptPlace();
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
