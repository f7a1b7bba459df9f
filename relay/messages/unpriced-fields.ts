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
// Context editing that only clears (`clear_tool_uses_…`, `clear_thinking_…`) lowers the input and
// passes.
import { RelayError } from '../errors.js';
import type { MessagesRequest } from './messages-request.js';

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
  const tools = b.tools;
  if (Array.isArray(tools)) {
    for (let i = 0; i < tools.length; i++) {
      const type = (tools[i] as { type?: unknown } | null)?.type;
      if (typeof type === 'string' && type.startsWith('code_execution')) {
        return invalid(`tools.${i}.type: code execution is not served by this gateway (its container time is billed beyond the request's tokens)`);
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
