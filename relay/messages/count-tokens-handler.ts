// POST /v1/messages/count_tokens, Anthropic's shape: {model, messages, system?, tools?, ...} →
// {"input_tokens": N}. Counted locally on the token-counting workers (the model's encoding, encoding-of.ts; what counts is
// listed in relay/token-count/prompt-text.ts), so it costs no provider call and moves no quota; the figure
// is an estimate of the provider's, as the model's own tokenizer is not public.
//
// It is free for the caller but not for the relay: the workers are shared with every request's
// billing. So a count is made only for a known key that passes its rules, within the key's
// COUNT_TOKENS_PER_MINUTE, and only while the counting queue has room (else 529).
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { z } from 'zod';
import { beginKeyLookup, checkAccess, UNKNOWN_KEY_ERROR } from '../auth/key-check.js';
import { RelayError } from '../errors.js';
import { readBody, readHead, Reply, type FreeEndpointContext } from '../free-request.js';
import { servedModels } from '../routing/group-routing.js';
import { currentMinute, type QuotaStore } from '../../core/quota/quota-store.js';
import { imageScaling, type ImageScaling } from '../../core/pricing/input-bound.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import type { PromptPlace, TokenCounter } from '../token-count/token-counter.js';
import { parseRequestJson } from './raw-json-guard.js';
import { ACCOUNT_BUSY_RETRY_AFTER, accountBusyError, takeCountPlace } from './count-place.js';
import { compileEdgeSchema } from '../edge-schema.js';
import { encodingOf } from '../token-count/encoding-of.js';

const block = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(block)]);

/** Like messagesRequestSchema without max_tokens and stream; unknown fields are accepted and ignored. */
export const countTokensRequestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content }).loose()).min(1),
    system: z.union([z.string(), z.array(block)]).optional(),
    // Any tool object: toolsets (computer_toolset_…, browser_toolset_…) and MCP toolsets have no
    // `name`, and /v1/messages serves them. The counter takes each tool's JSON (prompt-text.ts).
    tools: z.array(z.object({}).loose()).optional(),
  })
  .loose();

export type CountTokensRequest = z.infer<typeof countTokensRequestSchema>;

/** The body when it is a valid count_tokens request (the same object), else its first problem. */
export const checkCountTokensRequest = compileEdgeSchema(countTokensRequestSchema);

/**
 * The answer to a validated body. Pass `raw` (the request bytes) to have the worker parse them: the
 * event loop then copies bytes instead of structured-cloning the parsed object. Documents are
 * estimated by their pages (estimateMedia, prompt-text.ts), not the JSON bytes billing keeps;
 * images by their size as the model the provider is sent scales them: `sentModels`, the models the
 * serving channels send (a channel's model_mapping), the largest sizing among them as a retry may go
 * to any; the asked model when none is given or none has a known sizing.
 */
export async function countTokensResponse(
  counter: Pick<PromptPlace, 'count'>, body: CountTokensRequest, raw?: Uint8Array, sentModels: readonly string[] = [],
): Promise<{ input_tokens: number }> {
  const input_tokens = await counter.count(raw ?? body, encodingOf(body.model), { estimateMedia: true, imageScaling: largestImageScaling(body.model, sentModels) });
  return { input_tokens };
}

function largestImageScaling(model: string, sentModels: readonly string[]): ImageScaling | undefined {
  let largest: ImageScaling | undefined;
  for (const sent of sentModels) {
    const scaling = imageScaling(sent);
    if (scaling !== undefined && (largest === undefined || scaling.tokens > largest.tokens)) largest = scaling;
  }
  return largest ?? imageScaling(model);
}

export interface CountTokensContext extends FreeEndpointContext {
  tokens: TokenCounter;
  quota: Pick<QuotaStore, 'takeCountSlot'>;
  /** Token counts (count_tokens calls, prompt counts) per key per minute. */
  countsPerMinute: number;
  /** Prompt counts one account may have queued or running at once (COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT; the TokenCounter enforces it). */
  countsInFlightPerAccount: number;
}

/**
 * uWS handler of POST /v1/messages/count_tokens: the key (presence and shape from the headers, looked
 * up while the body streams in; an unknown key is answered without parsing the body), a body
 * validated by countTokensRequestSchema, the key's rules (as for /v1/messages, the model included),
 * 404 when no channel serves the model for the key's group, the key's per-minute budget of counts,
 * then {"input_tokens": N} counted on the workers. No quota moves.
 */
export function handleCountTokens(ctx: CountTokensContext, res: HttpResponse, req: HttpRequest): void {
  const head = readHead(ctx, res, req);
  const reply = new Reply(res, head.declaredLength);
  const found = beginKeyLookup(ctx, head.apiKey);
  if (found instanceof RelayError) return reply.error(found);
  // An unknown key is answered as soon as the lookup says so, the rest of its body dropped unread.
  if (found instanceof Promise) {
    found.then((r) => {
      if (r === UNKNOWN_KEY_ERROR) reply.error(r);
    }, () => {});
  }
  (async () => {
    const raw = await readBody(ctx, reply, head);
    if (!raw || reply.done) return;
    const record = found instanceof Promise ? await found : found;
    if (reply.done) return;
    if (record instanceof RelayError) return reply.error(record);
    const json = parseRequestJson(raw);
    if (json instanceof RelayError) return reply.error(json);
    const body = checkCountTokensRequest(json);
    if (body instanceof RelayError) return reply.error(body);
    const access = checkAccess(ctx, head, record, body.model);
    if (access instanceof RelayError) return reply.error(access);
    if (!servedModels(ctx.channels, access.groups).has(body.model)) {
      return reply.error(new RelayError('model_not_found', `No channel serves model "${body.model}" for group "${access.groups[0]}".`));
    }
    const sentModels = access.groups.flatMap((group) => ctx.channels.sentModels(group, body.model));
    const now = Date.now();
    const place = await takeCountPlace(ctx.tokens, ctx.quota, record, ctx.countsPerMinute, currentMinute(now));
    if (place === 'queue_full') return reply.error(new RelayError('relay_overloaded'));
    if (place === 'account_busy') return reply.error(accountBusyError(ctx.countsInFlightPerAccount), ACCOUNT_BUSY_RETRY_AFTER);
    if (place === 'budget_spent') {
      const retryAfter = String(60 - Math.floor((now / 1000) % 60));
      return reply.error(new RelayError('rate_limited', `Rate limit of ${ctx.countsPerMinute} token counts per minute reached for this API key.`), retryAfter);
    }
    if (reply.aborted) return place.release();
    relayMetrics.promptCounted();
    const answer = await countTokensResponse(place, body, raw, sentModels);
    reply.json(200, JSON.stringify(answer));
  })().catch((err: unknown) => {
    ctx.log.error({ err }, 'count_tokens failed');
    reply.error(new RelayError('internal'));
  });
}
