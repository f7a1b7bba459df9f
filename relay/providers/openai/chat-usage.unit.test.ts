// A Chat Completions usage object as the relay bills it (chat-usage.ts): the cached prompt tokens are
// cache reads, and a count a provider overstates is billed at MAX_USAGE_COUNT (stream/usage-count.ts).
import { describe, expect, it } from 'vitest';
import { MAX_CARRIED_LINE } from '../../stream/sse-bytes.js';
import { MAX_USAGE_COUNT } from '../../stream/usage-count.js';
import { ChatStreamMeter, textOfChatBody, usageOfChatBody, usageOfChatUsage } from './chat-usage.js';

describe('usageOfChatUsage', () => {
  it('takes the cached prompt tokens as cache reads and the rest as input', () => {
    expect(usageOfChatUsage({ prompt_tokens: 120, completion_tokens: 33, prompt_tokens_details: { cached_tokens: 20 } }))
      .toEqual({ inputTokens: 100, outputTokens: 33, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 20 });
    expect(usageOfChatUsage({ object: 'chat.completion' })).toBeNull();
    // One count alone: the other side is marked unstated, and the relay counts it (the prompt, the answer).
    const zero = { inputTokens: 0, outputTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 };
    expect(usageOfChatUsage({ completion_tokens: 40 })).toEqual({ ...zero, outputTokens: 40, inputUnstated: true });
    expect(usageOfChatUsage({ prompt_tokens: 900, completion_tokens: null })).toEqual({ ...zero, inputTokens: 900, outputUnstated: true });
    // Below 0 is no count; a prompt of 0 is none (a request has at least one token).
    expect(usageOfChatUsage({ prompt_tokens: -1000, completion_tokens: -5 })).toBeNull();
    expect(usageOfChatUsage({ prompt_tokens: 0, completion_tokens: 0 })).toEqual({ ...zero, inputUnstated: true });
    expect(usageOfChatUsage({ prompt_tokens: -1000, completion_tokens: 50 })).toEqual({ ...zero, outputTokens: 50, inputUnstated: true });
  });

  it('bills the reasoning tokens a provider reports outside completion_tokens (xAI, Gemini: total = prompt + completion + reasoning)', () => {
    // xAI's grok usage: 1,499 answer tokens plus 2,809 of reasoning, the total 14,428.
    expect(usageOfChatUsage({
      prompt_tokens: 10_120, completion_tokens: 1_499, total_tokens: 14_428,
      prompt_tokens_details: { cached_tokens: 128 }, completion_tokens_details: { reasoning_tokens: 2_809 },
    })).toMatchObject({ inputTokens: 9_992, outputTokens: 4_308, cacheReadTokens: 128 });
    // OpenAI's reasoning is inside completion_tokens (its total adds up): not billed twice.
    expect(usageOfChatUsage({ prompt_tokens: 32, completion_tokens: 103, total_tokens: 135, completion_tokens_details: { reasoning_tokens: 94 } }))
      .toMatchObject({ inputTokens: 32, outputTokens: 103 });
    // A total past the sum without reasoning tokens to explain it, or one short of it, changes nothing.
    expect(usageOfChatUsage({ prompt_tokens: 32, completion_tokens: 9, total_tokens: 500 })).toMatchObject({ outputTokens: 9 });
    expect(usageOfChatUsage({ prompt_tokens: 32, completion_tokens: 9, total_tokens: 10, completion_tokens_details: { reasoning_tokens: 50 } })).toMatchObject({ outputTokens: 9 });
    // Reasoning partly outside: only the part the total shows outside is added.
    expect(usageOfChatUsage({ prompt_tokens: 32, completion_tokens: 9, total_tokens: 61, completion_tokens_details: { reasoning_tokens: 94 } })).toMatchObject({ outputTokens: 29 });
  });

  it('bills a count past any real request at the bound, so that what is derived from it stays a whole number the books hold', () => {
    expect(usageOfChatUsage(JSON.parse('{"prompt_tokens":1e400,"completion_tokens":3e9,"prompt_tokens_details":{"cached_tokens":1e300}}')))
      .toEqual({ inputTokens: 0, outputTokens: MAX_USAGE_COUNT, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: MAX_USAGE_COUNT });
    expect(usageOfChatUsage({ prompt_tokens: 5e8, completion_tokens: -1 }))
      .toEqual({ inputTokens: MAX_USAGE_COUNT, outputTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0, outputUnstated: true });
  });
});

const chunk = (delta: unknown, finish: string | null = null) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":${JSON.stringify(delta)},"finish_reason":${finish ? `"${finish}"` : 'null'}}],"usage":null}\n\n`;

describe('ChatStreamMeter', () => {
  it('hands over reasoning (OpenRouter, vLLM) and refusal (OpenAI) text for a stream that states no usage', () => {
    const texts: string[] = [];
    const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => texts.push(buf.toString('utf8', start, end)) });
    meter.push(Buffer.from(chunk({ role: 'assistant', content: null, refusal: null, reasoning: null })
      + chunk({ reasoning: 'let me think' }) + chunk({ reasoning_content: 'more' }) + chunk({ refusal: 'I cannot help' })));
    expect(texts).toEqual(['let me think', 'more', 'I cannot help']);
    expect(meter.contentDeltas).toBe(3);
    // In a chunk that is parsed (the usage rides on it) as well.
    const parsed: string[] = [];
    const late = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => parsed.push(buf.toString('utf8', start, end)) });
    late.push(Buffer.from('data: {"choices":[{"index":0,"delta":{"reasoning":"r","refusal":"no"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'));
    expect(parsed).toEqual(['r', 'no']);
  });

  it('is complete at [DONE], or at the usage that follows a finish_reason (servers that close without [DONE])', () => {
    const meter = new ChatStreamMeter();
    meter.push(Buffer.from(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'hi' }) + chunk({}, 'stop')));
    expect(meter.complete).toBe(false);
    meter.push(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'));
    expect(meter).toMatchObject({ complete: true, sawMessageStop: false });
    // A usage before the finish (a provider that states it on every chunk) is no end; content after the last usage undoes it.
    const early = new ChatStreamMeter();
    early.push(Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'));
    expect(early.complete).toBe(false);
    early.push(Buffer.from('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'));
    expect(early.complete).toBe(true);
    const done = new ChatStreamMeter();
    done.push(Buffer.from(chunk({ role: 'assistant', content: '' }) + 'data: [DONE]\n\n'));
    expect(done.complete).toBe(true);
    // [DONE] with no chunk before it is no answer.
    const doneAlone = new ChatStreamMeter();
    doneAlone.push(Buffer.from('data: [DONE]\n\n'));
    expect(doneAlone).toMatchObject({ complete: false, sawMessageStop: true });
  });

  it('says when the generation is over (a finish_reason), before the usage that follows it', () => {
    const meter = new ChatStreamMeter();
    meter.push(Buffer.from(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'hi' })));
    expect(meter.generationDone).toBe(false);
    meter.push(Buffer.from(chunk({}, 'stop')));
    expect(meter).toMatchObject({ generationDone: true, sawMessageDelta: false });
    meter.push(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n'));
    expect(meter).toMatchObject({ generationDone: true, sawMessageDelta: true, sawMessageStop: true });
    // Spaced JSON, and a finish_reason that rides on the usage chunk.
    const spaced = new ChatStreamMeter();
    spaced.push(Buffer.from('data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}\n\n'));
    expect(spaced.generationDone).toBe(true);
    const onUsage = new ChatStreamMeter();
    onUsage.push(Buffer.from('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'));
    expect(onUsage).toMatchObject({ generationDone: true, sawMessageDelta: true });
  });
});

describe('the service tier an answer says served it', () => {
  it('is flex only when the answer (or the stream\'s last usage chunk) says "flex"', () => {
    const body = (tier: unknown) => Buffer.from(JSON.stringify({ object: 'chat.completion', service_tier: tier, usage: { prompt_tokens: 5, completion_tokens: 2 } }));
    expect(usageOfChatBody(body('flex'))!.flexServed).toBe(true);
    for (const tier of ['default', 'auto', 'priority', 'FLEX', null, undefined, ['flex']]) expect(usageOfChatBody(body(tier))!.flexServed).toBeUndefined();
    const usageChunk = (tier: string) => `data: {"choices":[],"service_tier":"${tier}","usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n`;
    const meter = new ChatStreamMeter();
    meter.push(Buffer.from(usageChunk('flex')));
    expect(meter.flexServed).toBe(true);
    // A later usage chunk (a server restating its usage) says the tier again.
    meter.push(Buffer.from(usageChunk('default')));
    expect(meter.flexServed).toBe(false);
    // Content chunks are not parsed: their tier says nothing without a usage.
    const contentOnly = new ChatStreamMeter();
    contentOnly.push(Buffer.from('data: {"service_tier":"flex","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'));
    expect(contentOnly.flexServed).toBe(false);
  });
});

describe('textOfChatBody', () => {
  it('takes the reasoning and the refusal of each choice', () => {
    const body = { choices: [{ message: { content: null, reasoning: 'thought', refusal: 'I cannot' } }, { message: { content: 'a', reasoning_content: 'r' } }] };
    expect(textOfChatBody(Buffer.from(JSON.stringify(body)))).toBe('thought\nI cannot\na\nr');
  });
});

describe('ChatStreamMeter, what a usage states and what follows it', () => {
  const usage = (prompt: number, completion: number) => `data: {"choices":[],"usage":{"prompt_tokens":${prompt},"completion_tokens":${completion}}}\n\n`;

  it('takes a usage followed by content as no final usage, and never lowers a stated output', () => {
    const meter = new ChatStreamMeter();
    meter.push(Buffer.from(usage(1000, 0) + chunk({ content: 'a' }) + chunk({ content: 'b' })));
    expect(meter).toMatchObject({ inputTokens: 1000, inputStated: true, outputTokens: 0, sawMessageDelta: true, contentAfterUsage: true, contentDeltas: 2 });
    meter.push(Buffer.from(usage(1000, 7)));
    expect(meter).toMatchObject({ outputTokens: 7, contentAfterUsage: false });
    meter.push(Buffer.from(usage(1000, 3)));
    expect(meter.outputTokens).toBe(7);
    // Text that rides on the usage chunk is covered by it.
    const riding = new ChatStreamMeter();
    riding.push(Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'));
    expect(riding).toMatchObject({ contentAfterUsage: false, sawMessageDelta: true, contentDeltas: 1 });
  });

  it('takes no count below 0, nor a prompt of 0', () => {
    const meter = new ChatStreamMeter();
    meter.push(Buffer.from(chunk({ content: 'a' }) + usage(-1000, -5)));
    expect(meter).toMatchObject({ inputStated: false, sawMessageDelta: false, inputTokens: 0 });
    const zero = new ChatStreamMeter();
    zero.push(Buffer.from(usage(0, 5)));
    expect(zero).toMatchObject({ inputStated: false, sawMessageDelta: true, outputTokens: 5 });
  });

  it('ends lines at a lone CR, and joins the data lines of one event', () => {
    const texts: string[] = [];
    const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (b, s, e) => texts.push(b.toString('utf8', s, e)) });
    const split = (usage(1000, 50)).replace('"choices":[],', '"choices":[],\ndata: ');
    const bytes = Buffer.from((chunk({ content: 'a' }) + chunk({ content: 'b' }) + split + 'data: [DONE]\n\n').replaceAll('\n', '\r'));
    for (let i = 0; i < bytes.length; i += 7) meter.push(bytes.subarray(i, i + 7));
    expect(texts).toEqual(['a', 'b']);
    expect(meter).toMatchObject({ inputTokens: 1000, outputTokens: 50, sawMessageDelta: true, sawMessageStop: true, contentAfterUsage: false });
  });

  it('counts its data lines as progress, not its comments', () => {
    const meter = new ChatStreamMeter();
    meter.push(Buffer.from(': keep-alive\n\n: OPENROUTER PROCESSING\n\n'));
    expect(meter.events).toBe(0);
    meter.push(Buffer.from(chunk({ content: 'a' })));
    expect(meter.events).toBe(1);
  });

  it('hands over the text of a chunk longer than MAX_CARRIED_LINE piece by piece, and the strings after it', () => {
    const pieces: string[] = [];
    const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (b, s, e) => pieces.push(b.toString('utf8', s, e)) });
    const text = 'tök "q" \\ é '.repeat(120_000);
    const line = `data: {"choices":[{"index":0,"delta":{"reasoning":"short","content":${JSON.stringify(text)},"refusal":"no"},"finish_reason":"stop"}]}\n\n`;
    const bytes = Buffer.from(line + usage(5, 9));
    expect(bytes.length).toBeGreaterThan(MAX_CARRIED_LINE);
    for (let i = 0; i < bytes.length; i += 65_537) meter.push(bytes.subarray(i, i + 65_537));
    const decoded = pieces.map((p) => JSON.parse('"' + p + '"') as string);
    expect(decoded[0]).toBe('short');
    expect(decoded.slice(1, -1).join('')).toBe(text);
    expect(decoded.at(-1)).toBe('no');
    expect(meter).toMatchObject({ generationDone: true, outputTokens: 9, sawMessageDelta: true });
  });
});

describe('ChatStreamMeter: the end of the stream', () => {
  const usage = (u: unknown) => `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":${JSON.stringify(u)}}\n\n`;
  const STREAM = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one' }) + chunk({ content: ' two' }) + chunk({}, 'stop')
    + usage({ prompt_tokens: 10, completion_tokens: 2 }) + 'data: [DONE]\n\n';
  const TAIL = chunk({ content: 'late' }) + usage({ prompt_tokens: 1318, completion_tokens: 999 }) + 'data: [DONE]\n\n';
  for (const [name, stream] of [['LF', STREAM], ['CRLF', STREAM.replace(/\n/g, '\r\n')], ['a comment in [DONE]\'s event', STREAM.replace('data: [DONE]\n', 'data: [DONE]\n: bye\n')]] as const) {
    it(`${name}: endedAt is where [DONE]'s event ends, whatever the chunking, and nothing after it is read`, () => {
      const bytes = Buffer.from(stream + TAIL);
      for (const size of [1, 3, 16, bytes.length]) {
        const texts: string[] = [];
        const m = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => texts.push(buf.toString('utf8', start, end)) });
        let passed = 0;
        for (let i = 0; i < bytes.length; i += size) {
          const part = bytes.subarray(i, i + size);
          m.push(part);
          if (m.endedAt >= 0) {
            passed = i + m.endedAt;
            break;
          }
          passed = i + part.length;
        }
        // A CRLF cut after its CR ends the event at the CR (a line break of its own), its LF unread.
        const whole = Buffer.byteLength(stream);
        expect(passed === whole || (stream.endsWith('\r\n') && passed === whole - 1)).toBe(true);
        m.push(Buffer.from(TAIL));
        expect(m.endedAt).toBe(0);
        expect([m.inputTokens, m.outputTokens]).toEqual([10, 2]);
        expect(texts.join('')).toBe('one two');
      }
    });
  }
});

// Shapes of OpenAI-compatible providers (review oaicompat). Before: DeepSeek's prompt_cache_hit_tokens
// and Moonshot's top-level cached_tokens were billed as full-price input (1250 quota for 710), and
// Moonshot's streamed usage, nested in the finish chunk's choices[0].usage, was not read at all (the
// relay's own count billed: a prompt of 245 tokens for 1000).
describe('usage where OpenAI-compatible providers put it', () => {
  const base = { prompt_tokens: 1000, completion_tokens: 50, total_tokens: 1050 };
  it('cache hits: prompt_tokens_details.cached_tokens, else DeepSeek\'s prompt_cache_hit_tokens, else Moonshot\'s top-level cached_tokens', () => {
    const cached600 = { inputTokens: 400, outputTokens: 50, cacheReadTokens: 600 };
    expect(usageOfChatUsage({ ...base, prompt_cache_hit_tokens: 600, prompt_cache_miss_tokens: 400 })).toMatchObject(cached600);
    expect(usageOfChatUsage({ ...base, cached_tokens: 600 })).toMatchObject(cached600);
    // Both stated (DeepSeek sends OpenAI's field too): counted once, OpenAI's first.
    expect(usageOfChatUsage({ ...base, prompt_cache_hit_tokens: 600, prompt_tokens_details: { cached_tokens: 600 } })).toMatchObject(cached600);
    expect(usageOfChatUsage({ ...base, prompt_cache_hit_tokens: 999, prompt_tokens_details: { cached_tokens: 600 } })).toMatchObject(cached600);
    // Never more than the prompt; no count is none.
    expect(usageOfChatUsage({ ...base, cached_tokens: 5000 })).toMatchObject({ inputTokens: 0, cacheReadTokens: 1000 });
    expect(usageOfChatUsage({ ...base, prompt_cache_hit_tokens: '600' })).toMatchObject({ inputTokens: 1000, cacheReadTokens: 0 });
  });

  it('cache writes: DashScope\'s prompt_tokens_details.cache_creation_input_tokens (its explicit cache), OpenRouter\'s cache_write_tokens, the hour\'s apart', () => {
    expect(usageOfChatUsage({ ...base, prompt_tokens_details: { cached_tokens: 0, cache_creation_input_tokens: 500, cache_creation: { ephemeral_5m_input_tokens: 500 }, cache_type: 'ephemeral' } }))
      .toMatchObject({ inputTokens: 500, cacheCreationTokens: 500, cacheCreation1hTokens: 0, cacheReadTokens: 0, outputTokens: 50 });
    expect(usageOfChatUsage({ ...base, prompt_tokens_details: { cached_tokens: 300, cache_creation_input_tokens: 500, cache_creation: { ephemeral_1h_input_tokens: 200 } } }))
      .toMatchObject({ inputTokens: 200, cacheCreationTokens: 500, cacheCreation1hTokens: 200, cacheReadTokens: 300 });
    // OpenRouter's name for them.
    expect(usageOfChatUsage({ ...base, prompt_tokens_details: { cached_tokens: 100, cache_write_tokens: 400, audio_tokens: 0 } }))
      .toMatchObject({ inputTokens: 500, cacheCreationTokens: 400, cacheReadTokens: 100 });
    // Never more than the prompt leaves.
    expect(usageOfChatUsage({ ...base, prompt_tokens_details: { cached_tokens: 900, cache_creation_input_tokens: 500 } }))
      .toMatchObject({ inputTokens: 0, cacheCreationTokens: 100, cacheReadTokens: 900 });
    const m = new ChatStreamMeter();
    m.push(Buffer.from(chunk({ content: 'hi' }, 'stop') + `data: {"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":0,"cache_creation_input_tokens":500}}}\n\ndata: [DONE]\n\n`));
    expect([m.inputTokens, m.cacheCreationTokens, m.cacheReadTokens]).toEqual([500, 500, 0]);
  });

  it('a stream\'s usage nested in the finish chunk\'s choice (Moonshot), read once even when restated at the top level after it', () => {
    const kimi = { ...base, cached_tokens: 600 };
    const finishWithUsage = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":${JSON.stringify(kimi)}}]}\n\n`;
    const topLevel = `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":${JSON.stringify(kimi)}}\n\n`;
    for (const tail of ['', topLevel]) {
      const m = new ChatStreamMeter();
      m.push(Buffer.from(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'hi' }) + finishWithUsage + tail + 'data: [DONE]\n\n'));
      expect({ input: m.inputTokens, cached: m.cacheReadTokens, output: m.outputTokens, stated: m.inputStated, complete: m.complete }).toEqual({ input: 400, cached: 600, output: 50, stated: true, complete: true });
    }
  });
});

// The meter finds its keys by a pass of its own over each line (and buf.indexOf past SHORT_SCAN
// bytes): Buffer.indexOf's setup at each call was 82% of its time on an OpenAI stream. Whatever the
// reads (one per event, a few bytes, the whole stream at once), it reads the same.
describe('ChatStreamMeter: the same reading whatever the reads', () => {
  it('every kind of text, keys inside strings, a usage between deltas: one event a read, 7 bytes a read, all at once', () => {
    const deltas = [
      { role: 'assistant', content: '', refusal: null }, { content: 'say "content":"x" and \\"usage\\"' }, { reasoning_content: 'r1' },
      { reasoning: '"reasoning" plain' }, { refusal: 'no, "arguments"' }, { tool_calls: [{ index: 0, id: 'c', function: { name: 'f', arguments: '{"a":"\\"usage\\":1"}' } }] },
      ...Array.from({ length: 40 }, (_, i) => ({ content: `tok${i} é€𝄞 ` })),
    ];
    const events = [...deltas.map((d) => chunk(d)), chunk({}, 'stop'), 'data: {"id":"x","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":64,"prompt_tokens_details":{"cached_tokens":4}}}\n\n', 'data: [DONE]\n\n'];
    const whole = Buffer.from(events.join(''));
    const read = (reads: Buffer[]) => {
      const texts: string[] = [];
      const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => texts.push(buf.toString('utf8', start, end)) });
      for (const r of reads) meter.push(r);
      return { texts: texts.join(''), input: meter.inputTokens, output: meter.outputTokens, cached: meter.cacheReadTokens, complete: meter.complete, deltas: meter.contentDeltas };
    };
    const perEvent = read(events.map((e) => Buffer.from(e)));
    const sevens = read(Array.from({ length: Math.ceil(whole.length / 7) }, (_, i) => whole.subarray(i * 7, i * 7 + 7)));
    const once = read([whole]);
    expect(perEvent).toEqual({ texts: expect.stringContaining('tok39'), input: 7, output: 64, cached: 4, complete: true, deltas: 45 });
    expect(perEvent.texts).toContain('say \\"content\\":\\"x\\"');
    expect(sevens).toEqual(perEvent);
    expect(once).toEqual(perEvent);
    expect(whole.length).toBeGreaterThan(512);
  });
});
