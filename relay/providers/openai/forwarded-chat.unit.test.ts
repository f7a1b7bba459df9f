// What a Chat Completions request is sent to an OpenAI-format provider as (forwardedChat): the tier
// OpenAI's own API is asked for. Before, a request without a tier, or `auto`, went as it was, and a
// project whose default tier is Priority served it at about twice the standard price it was billed
// (gpt-5: 415 quota charged by OpenAI for 208 billed).
import { describe, expect, it } from 'vitest';
import { checkChatRequest, type ChatRequest } from '../../chat-completions/chat-request.js';
import { forwardedChat } from './forwarded-chat.js';
import { isOpenAiApi } from './service-tier.js';

function chat(extra: Record<string, unknown>): { chat: ChatRequest; raw: Buffer } {
  const json = { model: 'gpt-5', max_completion_tokens: 100, messages: [{ role: 'user', content: 'hi' }], ...extra };
  const parsed = checkChatRequest(json);
  if (!('messages' in parsed)) throw new Error('not a chat request');
  return { chat: parsed, raw: Buffer.from(JSON.stringify(json)) };
}
const sent = (extra: Record<string, unknown>, openAiApi: boolean) => {
  const { chat: c, raw } = chat(extra);
  return JSON.parse(forwardedChat(c, raw, 'gpt-5', false, 100, openAiApi).toString()) as Record<string, unknown>;
};

describe('forwardedChat: the service tier', () => {
  it('to OpenAI\'s API, a request without a tier or with auto is sent the standard tier', () => {
    expect(sent({}, true).service_tier).toBe('default');
    expect(sent({ service_tier: 'auto' }, true).service_tier).toBe('default');
    expect(sent({ service_tier: null }, true).service_tier).toBe('default');
  });

  it('a tier the client chose is sent as it is', () => {
    expect(sent({ service_tier: 'flex' }, true).service_tier).toBe('flex');
    expect(sent({ service_tier: 'default' }, true).service_tier).toBe('default');
  });

  it('to another OpenAI-format provider, nothing is added: its bytes go as the client sent them', () => {
    const { chat: c, raw } = chat({});
    expect(forwardedChat(c, raw, 'gpt-5', false, 100, false)).toBe(raw);
    expect(sent({ service_tier: 'auto' }, false).service_tier).toBe('auto');
  });
});

describe('isOpenAiApi', () => {
  it('is OpenAI\'s own host only', () => {
    expect(isOpenAiApi('https://api.openai.com')).toBe(true);
    expect(isOpenAiApi('https://api.openai.com/v1')).toBe(true);
    expect(isOpenAiApi('https://api.deepseek.com')).toBe(false);
    expect(isOpenAiApi('https://api.openai.com.evil.example')).toBe(false);
    expect(isOpenAiApi('not a url')).toBe(false);
  });
});
