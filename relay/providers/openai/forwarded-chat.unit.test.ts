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

// Edited in the bytes: JSON.stringify of the parsed body changed integers above 2^53 in every stream
// that did not ask for its usage (the OpenAI SDK's default) and in every mapped model (review http).
describe('forwardedChat: what it edits, the rest byte for byte', () => {
  const BIG = '{"model":"gpt-4o","seed":9007199254740993,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"id":{"enum":[12345678901234567890]}}}}}],"temperature":1.10';
  const parse = (raw: string): ChatRequest => {
    const parsed = checkChatRequest(JSON.parse(raw));
    if (!('messages' in parsed)) throw new Error('not a chat request');
    return parsed;
  };

  it('a stream without include_usage asks for it, integers above 2^53 and 1.10 kept as written', () => {
    const raw = `${BIG},"max_tokens":50,"stream":true}`;
    const out = forwardedChat(parse(raw), Buffer.from(raw), 'gpt-4o', false, 50, false).toString();
    expect(out).toContain('"seed":9007199254740993');
    expect(out).toContain('[12345678901234567890]');
    expect(out).toContain('"temperature":1.10');
    expect(JSON.parse(out).stream_options).toEqual({ include_usage: true });
  });

  it('stream_options the client sent keep their other members', () => {
    const raw = `${BIG},"max_tokens":50,"stream":true,"stream_options":{"include_obfuscation":false}}`;
    const out = JSON.parse(forwardedChat(parse(raw), Buffer.from(raw), 'gpt-4o', false, 50, false).toString()) as Record<string, unknown>;
    expect(out.stream_options).toEqual({ include_obfuscation: false, include_usage: true });
  });

  it('a mapped model, a bound moved to the field its model takes, a max_tokens lowered: edited in place', () => {
    const mappedRaw = `${BIG},"max_tokens":50}`;
    const mapped = forwardedChat(parse(mappedRaw), Buffer.from(mappedRaw), 'gpt-4o-2024-08-06', true, 50, false).toString();
    expect(mapped).toContain('"seed":9007199254740993');
    expect(JSON.parse(mapped).model).toBe('gpt-4o-2024-08-06');
    // gpt-5 takes max_completion_tokens: the bound moves there.
    const moveRaw = `${BIG.replace('gpt-4o', 'gpt-5')},"max_tokens":50}`;
    const moved = forwardedChat(parse(moveRaw), Buffer.from(moveRaw), 'gpt-5', false, 50, false).toString();
    expect(moved).toContain('"seed":9007199254740993');
    expect(JSON.parse(moved)).toMatchObject({ max_completion_tokens: 50 });
    expect(JSON.parse(moved).max_tokens).toBeUndefined();
    const lowerRaw = `${BIG},"max_tokens":500,"max_completion_tokens":50}`;
    const lowered = forwardedChat(parse(lowerRaw), Buffer.from(lowerRaw), 'gpt-4o', false, 50, false).toString();
    expect(JSON.parse(lowered)).toMatchObject({ max_tokens: 50, max_completion_tokens: 50 });
    expect(lowered).toContain('[12345678901234567890]');
  });
});
