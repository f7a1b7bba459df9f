// The bytes a Chat Completions request is sent to an OpenAI-format provider as: the client's own when
// nothing changes, else rewritten.
import { outputLimitField } from '../../../core/channels/output-limit.js';
import type { ChatRequest } from '../../chat-completions/chat-request.js';
import { leavesTierToProject } from './service-tier.js';
import { withMemberSet, withoutTopLevelMember } from '../../messages/json-member.js';

/**
 * `chat` as sent to the provider: under the channel's model name (`mapped`); a stream asked for its
 * usage, which is what it is billed by; `maxTokens` (the output bound it was reserved at, per choice)
 * in the field its model takes; and, to OpenAI's own API (`openAiApi`), the standard tier where it
 * left the tier to the project's settings (service-tier.ts).
 */
export function forwardedChat(chat: ChatRequest, raw: Buffer, model: string, mapped: boolean, maxTokens: number, openAiApi: boolean): Buffer {
  const askUsage = chat.stream === true && chat.stream_options?.include_usage !== true;
  // The provider generates no more than reserved, and providers that read max_tokens only (DeepSeek,
  // older vLLM, Ollama) ignore max_completion_tokens: a request without a bound, or bounded by one
  // field alone where its model takes the other (OpenAI's reasoning models refuse max_tokens with a
  // 400), gets the bound in the field its model takes (core/channels/output-limit.ts), moved rather
  // than copied since OpenAI refuses both at once; a max_tokens above the max_completion_tokens it
  // was reserved at is lowered.
  const field = outputLimitField(model);
  const rebound = chat.max_tokens == null
    ? chat.max_completion_tokens == null || field === 'max_tokens'
    : chat.max_completion_tokens == null && field === 'max_completion_tokens';
  const lower = chat.max_completion_tokens != null && chat.max_tokens != null && chat.max_tokens > maxTokens;
  // Served at the standard price it is reserved at, not at the project's tier.
  const standardTier = openAiApi && leavesTierToProject((chat as { service_tier?: unknown }).service_tier);
  if (!mapped && !askUsage && !rebound && !lower && !standardTier) return raw;
  // Edited in the bytes, the rest as the client wrote it: JSON.stringify of the parsed body changed
  // an integer above 2^53 (a seed, an enum of ids in a tool's schema: 9007199254740993 → …992) in
  // every stream that did not ask for its usage, the OpenAI SDK's default (review http).
  let edited: Buffer | null = raw;
  if (mapped) edited = withMemberSet(edited, 'model', JSON.stringify(model));
  if (edited !== null && standardTier) edited = withMemberSet(edited, 'service_tier', '"default"');
  if (edited !== null && askUsage) edited = withMemberSet(edited, 'stream_options', JSON.stringify({ ...chat.stream_options, include_usage: true }));
  if (edited !== null && rebound) {
    edited = withoutTopLevelMember(edited, 'max_tokens') ?? edited;
    edited = withoutTopLevelMember(edited, 'max_completion_tokens') ?? edited;
    edited = withMemberSet(edited, field, String(maxTokens));
  }
  if (edited !== null && lower) edited = withMemberSet(edited, 'max_tokens', String(maxTokens));
  if (edited !== null) return edited;
  // Not an object's bytes (never, after the body's checks): written again from the parse.
  const out: Record<string, unknown> = { ...chat, model };
  if (standardTier) out.service_tier = 'default';
  if (askUsage) out.stream_options = { ...chat.stream_options, include_usage: true };
  if (rebound) {
    delete out.max_tokens;
    delete out.max_completion_tokens;
    out[field] = maxTokens;
  }
  if (lower) out.max_tokens = maxTokens;
  return Buffer.from(JSON.stringify(out));
}
