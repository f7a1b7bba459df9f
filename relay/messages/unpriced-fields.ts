// Fields of a Messages request that make Anthropic bill more than the relay prices, reserves and
// settles, refused (400, before anything is reserved) as the Chat Completions side refuses its own
// (relay/providers/anthropic/from-chat.ts, unpricedFieldRefusal). Passed through, each was billed at
// the standard price while the provider charged more (docs/billing.md; README, "Relay endpoints"):
// - `speed` other than "standard": fast mode, a multiple of the standard rates (6× on Claude Opus 4.6
//   and 4.7, across the whole context window);
// - `inference_geo` other than "global": US-only inference, 1.1× on Claude 4.6 and later;
// - server-side compaction (a `compact_…` edit in `context_management.edits`, or the `compaction`
//   parameter): the summarising pass is a sampling of its own, reported in `usage.iterations` and
//   not in the top-level usage the relay settles, and beyond the output bound it reserves.
// - code execution (a `code_execution_…` server tool, or a `container` to run it in): Anthropic
//   bills its container time by the hour beyond the free allowance, which no usage field reports.
// - server-side fallback (`fallbacks`): a model that declines hands the turn to another, dearer one
//   with its own `max_tokens`, reported in `usage.iterations`; the relay reserved and prices the
//   requested model and its `max_tokens` (a Haiku request served by Opus, 8,000 tokens, was billed
//   750 quota against Anthropic's 76,400). `fallback_credit_token` reprices a retry's cache writes;
// - the advisor tool (`advisor_…`): a sub-inference on the model the tool names, reported only in
//   `usage.iterations` (20,000 Opus tokens in and 1,600 out went unbilled);
// - server-held conversations (`thread`): a continued thread's prompt is the state Anthropic holds,
//   beyond the body's bytes that bound what the relay reserves and bills, and held under the
//   operator's organization, where any account that learned a message id could continue another's;
// - `billing_policy` other than `self`: the turn is billed to another organization than the
//   channel's, while the relay bills the account as if the channel paid.
// Context editing that only clears (`clear_tool_uses_…`, `clear_thinking_…`) lowers the input and
// passes.
import { RelayError } from '../errors.js';
import type { MessagesRequest } from './messages-request.js';
import { isWebSearchMaxUses, isWebSearchType } from './reservation-bound.js';

/** The refusal of the first unpriced field of `body`, or null. */
export function unpricedMessagesFieldRefusal(body: MessagesRequest): RelayError | null {
  const b = body as Record<string, unknown>;
  const speed = b.speed;
  if (speed !== undefined && speed !== null && speed !== 'standard') {
    return invalid('speed: only "standard" is served by this gateway (fast mode is priced above the model\'s rates)');
  }
  const geo = b.inference_geo;
  if (geo !== undefined && geo !== null && geo !== 'global') {
    return invalid('inference_geo: only "global" is served by this gateway (regional inference is priced above the model\'s rates)');
  }
  if (b.compaction !== undefined && b.compaction !== null) {
    return invalid('compaction: server-side compaction is not served by this gateway (its summarising pass is billed beyond the request\'s usage)');
  }
  if (b.container !== undefined && b.container !== null) {
    return invalid('container: code execution is not served by this gateway (its container time is billed beyond the request\'s tokens)');
  }
  // An empty list asks for none.
  if (b.fallbacks !== undefined && b.fallbacks !== null && !(Array.isArray(b.fallbacks) && b.fallbacks.length === 0)) {
    return invalid('fallbacks: server-side fallback is not served by this gateway (the model that serves the turn is priced and bounded as the requested one)');
  }
  if (b.fallback_credit_token !== undefined && b.fallback_credit_token !== null) {
    return invalid('fallback_credit_token: server-side fallback is not served by this gateway');
  }
  if (b.thread !== undefined && b.thread !== null) {
    return invalid('thread: server-held conversations are not served by this gateway (send the conversation in messages)');
  }
  const billTo = (b.billing_policy as { bill_to?: unknown } | null | undefined)?.bill_to;
  if (billTo !== undefined && billTo !== null && billTo !== 'self') {
    return invalid('billing_policy.bill_to: only "self" is served by this gateway (the gateway bills each request to its account)');
  }
  const tools = b.tools;
  if (Array.isArray(tools)) {
    for (let i = 0; i < tools.length; i++) {
      const type = (tools[i] as { type?: unknown } | null)?.type;
      if (typeof type !== 'string') continue;
      if (type.startsWith('code_execution')) {
        return invalid(`tools.${i}.type: code execution is not served by this gateway (its container time is billed beyond the request's tokens)`);
      }
      if (type.startsWith('advisor')) {
        return invalid(`tools.${i}.type: the advisor tool is not served by this gateway (its model's tokens are billed beyond the request's usage)`);
      }
      // The searches reserved and billed at most: read as unset, a negative or fractional bound was sent
      // as the default (20) and answered 200, where Anthropic refuses it.
      const maxUses = (tools[i] as { max_uses?: unknown }).max_uses;
      if (isWebSearchType(type) && maxUses !== undefined && maxUses !== null && !isWebSearchMaxUses(maxUses)) {
        return invalid(`tools.${i}.max_uses: must be a whole number of searches, 0 or more`);
      }
    }
  }
  const management = b.context_management;
  if (management !== null && typeof management === 'object') {
    const edits = (management as { edits?: unknown }).edits;
    if (Array.isArray(edits)) {
      for (let i = 0; i < edits.length; i++) {
        const type = (edits[i] as { type?: unknown } | null)?.type;
        if (typeof type === 'string' && type.startsWith('compact')) {
          return invalid(`context_management.edits.${i}.type: server-side compaction is not served by this gateway (its summarising pass is billed beyond the request's usage)`);
        }
      }
    }
  }
  return null;
}

function invalid(message: string): RelayError {
  return new RelayError('invalid_request', message);
}
