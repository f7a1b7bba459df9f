// POST /v1/messages/count_tokens, Anthropic's shape: {model, messages, system?, tools?, ...} →
// {"input_tokens": N}. Counted locally on the token-counting workers (cl100k_base; what counts is
// listed in relay/tokens/prompt-text.ts), so it costs no provider call and moves no quota; the figure
// is an estimate of the provider's, as the model's own tokenizer is not public.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { z } from 'zod';
import { RelayError } from '../errors.js';
import { checkAccess, lookupKey, readBody, readHead, Reply, servedModels, type FreeEndpointContext } from '../models/key-access.js';
import type { TokenCounter } from '../tokens/token-counter.js';
import { describeIssue } from './messages-request.js';

const block = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(block)]);

/** Like messagesRequestSchema without max_tokens and stream; unknown fields are accepted and ignored. */
export const countTokensRequestSchema = z
  .object({
    model: z.string({ error: 'model: required string' }).min(1, 'model: must not be empty'),
    messages: z
      .array(z.object({ role: z.enum(['user', 'assistant']), content }).loose(), { error: 'messages: required array' })
      .min(1, 'messages: at least one message is required'),
    system: z.union([z.string(), z.array(block)], { error: 'system: must be a string or an array of blocks' }).optional(),
    tools: z.array(z.object({ name: z.string() }).loose(), { error: 'tools: must be an array of tools' }).optional(),
  })
  .loose();

export type CountTokensRequest = z.infer<typeof countTokensRequestSchema>;

/**
 * The answer to a validated body. Pass `raw` (the request bytes) to have the worker parse them: the
 * event loop then copies bytes instead of structured-cloning the parsed object.
 */
export async function countTokensResponse(counter: Pick<TokenCounter, 'countPrompt'>, body: CountTokensRequest, raw?: Uint8Array): Promise<{ input_tokens: number }> {
  const input_tokens = await counter.countPrompt(raw ?? body);
  return { input_tokens };
}

/**
 * uWS handler of POST /v1/messages/count_tokens: the key's rules (as for /v1/messages, the model
 * included), a body validated by countTokensRequestSchema, 404 when no channel serves the model for
 * the key's group, then {"input_tokens": N} counted on the workers. No quota moves.
 */
export function handleCountTokens(ctx: FreeEndpointContext & { tokens: TokenCounter }, res: HttpResponse, req: HttpRequest): void {
  const head = readHead(ctx, res, req);
  const reply = new Reply(res);
  if (!head.apiKey) return reply.error(new RelayError('missing_api_key'));
  (async () => {
    const raw = await readBody(ctx, reply, head);
    if (!raw || reply.aborted) return;
    const record = await lookupKey(ctx, head);
    if (record instanceof RelayError) return reply.error(record);
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      return reply.error(new RelayError('invalid_json'));
    }
    const parsed = countTokensRequestSchema.safeParse(json);
    if (!parsed.success) return reply.error(new RelayError('invalid_request', describeIssue(parsed.error)));
    const access = checkAccess(ctx, head, record, parsed.data.model);
    if (access instanceof RelayError) return reply.error(access);
    if (!servedModels(ctx.channels, access.groups).has(parsed.data.model)) {
      return reply.error(new RelayError('model_not_found', `No channel serves model "${parsed.data.model}" for group "${access.groups[0]}".`));
    }
    const answer = await countTokensResponse(ctx.tokens, parsed.data, raw);
    reply.json(200, JSON.stringify(answer));
  })().catch((err: unknown) => {
    ctx.log.error({ err }, 'count_tokens failed');
    reply.error(new RelayError('internal'));
  });
}
