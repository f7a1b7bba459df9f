// Every final answer of reserveQuota-8.lua reaches the client as one relay error, through one table.
import { describe, expect, it } from 'vitest';
import { QuotaScriptCode, RESERVE_OUTCOME_OF_CODE } from '../core/quota/quota-outcomes.js';
import { reserveRefusalError } from './errors.js';

describe('reservation refusals', () => {
  it('maps each refusing script code to its relay error', () => {
    const answer = (code: QuotaScriptCode) => {
      const outcome = RESERVE_OUTCOME_OF_CODE.get(code);
      if (outcome === undefined || outcome === 'reserved') throw new Error(`${code} is not a refusal`);
      const err = reserveRefusalError(outcome, { rpm: 3, tpm: 1000 });
      return [err.status, err.code, err.message];
    };
    expect(RESERVE_OUTCOME_OF_CODE.get(QuotaScriptCode.Ok)).toBe('reserved');
    expect(answer(QuotaScriptCode.InsufficientBalance)).toEqual([402, 'insufficient_balance', 'The account balance is too low for this request: before it is sent, the cost of its prompt and of max_tokens of output is reserved.']);
    expect(answer(QuotaScriptCode.InsufficientTokenQuota)).toEqual([402, 'insufficient_key_quota', 'This API key\'s remaining quota is too low for this request.']);
    expect(answer(QuotaScriptCode.RequestRateLimited)).toEqual([429, 'rate_limited', 'Rate limit of 3 requests per minute reached for this API key.']);
    expect(answer(QuotaScriptCode.TokenRateLimited)).toEqual([429, 'rate_limited', 'Rate limit of 1000 tokens per minute reached for this API key.']);
    // A group's limit is the account's: the message says so, and names the group.
    expect(reserveRefusalError('rpm_limited', { rpm: 2, tpm: 0 }, 'vip').message).toBe('Rate limit of 2 requests per minute reached for this account\'s keys in group "vip".');
    expect(reserveRefusalError('tpm_limited', { rpm: 0, tpm: 500 }, 'vip').message).toBe('Rate limit of 500 tokens per minute reached for this account\'s keys in group "vip".');
    expect(answer(QuotaScriptCode.DuplicateReservation)).toEqual([500, 'internal', 'Internal error.']);
    // Not answers: the store seeds the mirror and asks again.
    expect(RESERVE_OUTCOME_OF_CODE.has(QuotaScriptCode.BalanceNotLoaded)).toBe(false);
    expect(RESERVE_OUTCOME_OF_CODE.has(QuotaScriptCode.TokenQuotaNotLoaded)).toBe(false);
  });
});
