// The conversions between Anthropic Messages and OpenAI Chat Completions, request and answer, and
// the stream rewriters and meter fed the providers' real streams (the mocks' wire formats) cut at
// every byte: what comes out never depends on where the network split the stream.
import { getHeapStatistics } from 'node:v8';
import { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream';
import { describe, expect, it } from 'vitest';
import { messageUsage, streamHead, streamTail, DELTA_EVENT, toolUseStream } from '../../bench/mock-upstream/wire-format.js';
import type { ChatRequest } from '../chat-completions/chat-request.js';
import { PROVIDER_ACCOUNT_REFUSED, RelayError } from '../errors.js';
import { MAX_USAGE_COUNT } from '../stream/usage-count.js';
import { MAX_CARRIED_LINE } from '../stream/sse-bytes.js';
import { JoinedDataTooLongError, MAX_JOINED_DATA } from '../stream/line-stream.js';
import type { MessagesRequest } from '../messages/messages-request.js';
import { anthropicOnlyRefusal, chatToMessages, countedForm, DEFAULT_MAX_TOKENS } from './anthropic/from-chat.js';
import { AnthropicToChatStream, messageToChat } from './anthropic/to-chat.js';
import { ChatStreamMeter, textOfChatBody } from './openai/chat-usage.js';
import { textOfMessageBody } from '../messages/message-usage.js';
import { messagesToChat } from './openai/from-messages.js';
import { ChatToAnthropicStream, chatToMessage, ChatUsageFilter, HeldArgumentsTooLongError, MAX_HELD_ARGUMENTS } from './openai/to-messages.js';
import { chunksAsCompletion, eventsAsMessage } from '../stream/stream-as-answer.js';

/** Feeds `whole` in pieces of `size` bytes; returns what the rewriter wrote. */
function feed(rewriter: { push(chunk: Buffer): string | Buffer }, whole: Buffer, size: number): string {
  let out = '';
  for (let i = 0; i < whole.length; i += size) out += rewriter.push(whole.subarray(i, i + size)).toString();
  return out;
}

const SIZES = [1, 2, 3, 7, 16, 64, 100_000];

function dataEvents(sse: string): unknown[] {
  return sse.split('\n\n').filter((e) => e !== '').map((e) => {
    const data = e.split('\n').find((l) => l.startsWith('data: '))!.slice(6);
    return data === '[DONE]' ? '[DONE]' : JSON.parse(data);
  });
}

// An Anthropic stream as the mock writes it, with a multi-byte character to be split mid-way.
const usage = messageUsage(11, 5, 0, 3);
const anthropicStream = Buffer.from(streamHead('msg_1', 'claude-x', usage) + DELTA_EVENT + DELTA_EVENT.replace('tok ', 'é€ ') + DELTA_EVENT + streamTail('end_turn', 3));

const chatChunk = (delta: unknown, finish: string | null = null) =>
  `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":${JSON.stringify(delta)},"finish_reason":${finish ? `"${finish}"` : 'null'}}],"usage":null}\n\n`;
const chatUsage = 'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":6}}}\n\n';
const chatStream = Buffer.from(
  chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hé' }) + chatChunk({ content: 'llo' })
  + chatChunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] })
  + chatChunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }) + chatChunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] })
  + chatChunk({}, 'tool_calls') + chatUsage + 'data: [DONE]\n\n',
);

describe('AnthropicToChatStream', () => {
  it.each(SIZES)('chunks of %i bytes: role, content, finish_reason, usage when asked, [DONE]', (size) => {
    const events = dataEvents(feed(new AnthropicToChatStream('my-model', true), anthropicStream, size));
    expect(events[events.length - 1]).toBe('[DONE]');
    const chunks = events.slice(0, -1) as Array<{ model: string; choices: Array<{ delta: { content?: string; role?: string }; finish_reason: string | null }>; usage?: unknown }>;
    // The role alone: a content of "" would make an answer of tool calls alone end with content "" in the openai SDK (7.x).
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant' });
    expect(chunks.every((c) => c.model === 'my-model')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('tok é€ tok ');
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks[chunks.length - 1]).toMatchObject({ choices: [], usage: { prompt_tokens: 16, completion_tokens: 3, total_tokens: 19, prompt_tokens_details: { cached_tokens: 5 } } });
  });

  it('leaves the usage chunk out when the client did not ask; a tool_use becomes tool_calls deltas', () => {
    const tool = Buffer.from(toolUseStream('msg_2', 'claude-x', usage, { name: 'lookup', input: { q: 'tok' } }, 'toolu_1'));
    const events = dataEvents(feed(new AnthropicToChatStream('m', false), tool, 5));
    expect(events[events.length - 1]).toBe('[DONE]');
    const chunks = events.slice(0, -1) as Array<{ choices: Array<{ delta: { tool_calls?: Array<{ index: number; id?: string; function: { name?: string; arguments: string } }> }; finish_reason: string | null }> }>;
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    const calls = chunks.flatMap((c) => c.choices[0]!.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, id: 'toolu_1', function: { name: 'lookup', arguments: '' } });
    expect(calls.map((c) => c.function.arguments).join('')).toBe('{"q":"tok"}');
    expect(chunks[chunks.length - 1]!.choices[0]!.finish_reason).toBe('tool_calls');
  });

  // Anthropic streams a call without arguments as `input: {}` at its start and one empty
  // partial_json; a provider may also state the whole input at the start and stream no delta.
  const toolEvents = (start: unknown, deltas: string[]) => [
    streamHead('msg_5', 'claude-x', usage),
    `event: content_block_start\ndata: ${JSON.stringify({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_9', name: 'now', input: start } })}\n\n`,
    ...deltas.map((d) => `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: d } })}\n\n`),
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    streamTail('tool_use', 3),
  ].join('');
  const argumentsOf = (sse: string) => (dataEvents(sse).slice(0, -1) as Array<{ choices: Array<{ delta: { tool_calls?: Array<{ function: { arguments: string } }> } }> }>)
    .flatMap((c) => c.choices[0]?.delta.tool_calls ?? []).map((c) => c.function.arguments).join('');

  it.each(SIZES)('chunks of %i bytes: a call that streams no arguments gets its start\'s input, {} at least', (size) => {
    expect(argumentsOf(feed(new AnthropicToChatStream('m', false), Buffer.from(toolEvents({}, [''])), size))).toBe('{}');
    expect(argumentsOf(feed(new AnthropicToChatStream('m', false), Buffer.from(toolEvents({ q: 'é' }, [])), size))).toBe('{"q":"é"}');
    expect(argumentsOf(feed(new AnthropicToChatStream('m', false), Buffer.from(toolEvents(undefined, [])), size))).toBe('{}');
    // Streamed arguments are not repeated at the block's stop.
    expect(argumentsOf(feed(new AnthropicToChatStream('m', false), Buffer.from(toolEvents({}, ['', '{"a"', ':1}'])), size))).toBe('{"a":1}');
  });

  it('with include_usage every chunk but the usage chunk says usage null, as OpenAI\'s do; without it none has usage', () => {
    const withUsage = dataEvents(new AnthropicToChatStream('m', true).push(anthropicStream)).slice(0, -1) as Array<{ usage?: unknown }>;
    expect(withUsage.slice(0, -1).every((c) => 'usage' in c && c.usage === null)).toBe(true);
    expect(withUsage.at(-1)!.usage).toMatchObject({ completion_tokens: 3 });
    const without = dataEvents(new AnthropicToChatStream('m', false).push(anthropicStream)).slice(0, -1) as Array<{ usage?: unknown }>;
    expect(without.some((c) => 'usage' in c)).toBe(false);
  });

  it('shows the client the counts it is billed for: capped like the relay\'s, 0 for what is not a count', () => {
    // As a provider could write them: 1e400 is valid JSON that parses as Infinity.
    const head = streamHead('msg_3', 'claude-x', messageUsage(111, 222, 0, 1))
      .replace('"input_tokens":111', '"input_tokens":1e300').replace('"cache_read_input_tokens":222', '"cache_read_input_tokens":1e400')
      .replace('"cache_creation_input_tokens":0', '"cache_creation_input_tokens":-4');
    expect(head).toContain('1e400');
    const out = new AnthropicToChatStream('m', true).push(Buffer.from(head + streamTail('end_turn', 3)));
    const events = dataEvents(out);
    expect(events.at(-2)).toMatchObject({ usage: { prompt_tokens: 2 * MAX_USAGE_COUNT, completion_tokens: 3, total_tokens: 2 * MAX_USAGE_COUNT + 3, prompt_tokens_details: { cached_tokens: MAX_USAGE_COUNT } } });
  });

  it.each([true, false])('a stream that ends with message_stop and no message_delta still gives a finish_reason (usage asked: %s)', (includeUsage) => {
    const noDelta = streamHead('msg_5', 'claude-x', usage) + DELTA_EVENT + 'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
      + 'event: message_stop\ndata: {"type":"message_stop"}\n\n';
    const events = dataEvents(new AnthropicToChatStream('m', includeUsage).push(Buffer.from(noDelta)));
    expect(events.at(-1)).toBe('[DONE]');
    const finishes = (events.slice(0, -1) as Array<{ choices: Array<{ finish_reason: string | null }> }>).flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null);
    expect(finishes).toEqual(['stop']);
    // With a message_delta, its finish_reason alone.
    const withDelta = dataEvents(new AnthropicToChatStream('m', includeUsage).push(anthropicStream)).slice(0, -1) as Array<{ choices: Array<{ finish_reason: string | null }> }>;
    expect(withDelta.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null)).toEqual(['stop']);
  });

  it('drops a line that never ends past MAX_CARRIED_LINE and converts on after its newline', () => {
    const conv = new AnthropicToChatStream('m', true);
    let out = conv.push(Buffer.from(streamHead('msg_4', 'claude-x', usage)));
    conv.push(Buffer.from('event: ping\ndata: '));
    const junk = Buffer.alloc(64 * 1024, 0x61);
    for (let sent = 0; sent <= MAX_CARRIED_LINE * 2; sent += junk.length) expect(conv.push(junk)).toBe('');
    out += conv.push(Buffer.from('\n\n' + DELTA_EVENT + streamTail('end_turn', 3)));
    const events = dataEvents(out);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.some((e) => typeof e === 'object' && JSON.stringify(e).includes('"content":"tok "'))).toBe(true);
  });

  it('an error event becomes OpenAI\'s error object, coded as a provider\'s error answered whole', () => {
    const error = (type: string) => new AnthropicToChatStream('m', false).push(Buffer.from(`event: error\ndata: {"type":"error","error":{"type":"${type}","message":"M"}}\n\n`));
    expect(dataEvents(error('overloaded_error'))).toEqual([{ error: { message: 'M', type: 'server_error', param: null, code: null } }]);
    // Before: code "rate_limit_error", where OpenAI's own and the relay's non-stream answers say rate_limit_exceeded.
    expect(dataEvents(error('rate_limit_error'))).toEqual([{ error: { message: 'M', type: 'rate_limit_exceeded', param: null, code: 'rate_limit_exceeded' } }]);
  });

  // Before: insufficient_quota with the provider's "credit balance too low", the words of the client's
  // own empty balance, for the gateway's account with the provider.
  it('a provider\'s billing_error event becomes a server_error about the gateway\'s own account, never insufficient_quota', () => {
    const out = new AnthropicToChatStream('m', false).push(Buffer.from('event: error\ndata: {"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}\n\n'));
    expect(dataEvents(out)).toEqual([{ error: { message: PROVIDER_ACCOUNT_REFUSED, type: 'server_error', param: null, code: null } }]);
  });
});

describe('ChatToAnthropicStream errors', () => {
  it('an error chunk keeps a rate limit or an overload as Anthropic\'s type (before: api_error for every one)', () => {
    const typeOf = (error: unknown) => {
      const out = new ChatToAnthropicStream('m').push(Buffer.from(`data: ${JSON.stringify({ error })}\n\n`));
      return (JSON.parse(out.split('\n')[1]!.slice(6)) as { error: { type: string } }).error.type;
    };
    expect(typeOf({ message: 'x', type: 'requests', code: 'rate_limit_exceeded' })).toBe('rate_limit_error');
    expect(typeOf({ message: 'x', type: 'rate_limit_exceeded' })).toBe('rate_limit_error');
    expect(typeOf({ message: 'x', type: 'server_error', code: 'overloaded' })).toBe('overloaded_error');
    expect(typeOf({ message: 'x', type: 'server_error', code: null })).toBe('api_error');
  });
});

describe('ChatToAnthropicStream', () => {
  it.each(SIZES)('chunks of %i bytes: message_start, a text block, a tool_use block, message_delta with the usage, message_stop', (size) => {
    const out = feed(new ChatToAnthropicStream('asked-model'), chatStream, size);
    const events = out.split('\n\n').filter((e) => e).map((e) => ({ event: e.split('\n')[0]!.slice(7), data: JSON.parse(e.split('\n')[1]!.slice(6)) as Record<string, unknown> }));
    expect(events.map((e) => e.event)).toEqual([
      'message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop',
      'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop',
    ]);
    expect(events[0]!.data).toMatchObject({ message: { id: 'msg_9', model: 'asked-model', role: 'assistant' } });
    expect(events[2]!.data).toMatchObject({ index: 0, delta: { type: 'text_delta', text: 'Hé' } });
    expect(events[5]!.data).toMatchObject({ index: 1, content_block: { type: 'tool_use', id: 'call_1', name: 'f' } });
    expect(events[6]!.data).toMatchObject({ index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":' } });
    expect(events[9]!.data).toEqual({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { input_tokens: 14, cache_creation_input_tokens: 0, cache_read_input_tokens: 6, output_tokens: 4, server_tool_use: null } });
  });
});

// Gemini's OpenAI-compatible endpoint streams parallel tool calls each whole, without `index`, and
// may end them with finish_reason "stop" (googleapis/python-genai#2868). Before: both calls went into
// one tool_use block whose input was `{"city":"Paris"}{"city":"Rome"}` (the Anthropic SDK threw on it),
// and the answer said stop_reason "end_turn", where an agent loop stops instead of running the tools.
describe('ChatToAnthropicStream: tool calls told apart by their id, and the stop reason of an answer of tool calls', () => {
  const call = (id: string, city: string) => ({ id, type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city }) } });
  const PARIS_ROME = [
    { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
    { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Rome' } },
  ];
  const streamOf = (...chunks: string[]) => Buffer.from(chatChunk({ role: 'assistant', content: null }) + chunks.join('') + chatUsage + 'data: [DONE]\n\n');
  /** The converted stream as the Message a client's accumulator makes of it. */
  const converted = (stream: Buffer, size: number) => eventsAsMessage(Buffer.from(feed(new ChatToAnthropicStream('m'), stream, size)))!.answer;
  const geminiParallel = streamOf(chatChunk({ tool_calls: [call('call_1', 'Paris')] }), chatChunk({ tool_calls: [call('call_2', 'Rome')] }), chatChunk({}, 'stop'));

  it.each(SIZES)('index-less calls with ids of their own are a tool_use block each, stop_reason tool_use (chunks of %i bytes)', (size) => {
    const message = converted(geminiParallel, size);
    expect(message.content).toEqual(PARIS_ROME);
    expect(message.stop_reason).toBe('tool_use');
  });

  it('agrees with the JSON path: the same stream folded (stream-as-answer.ts) and converted as a Chat Completion', () => {
    const viaJson = JSON.parse(chatToMessage(Buffer.from(JSON.stringify(chunksAsCompletion(geminiParallel)!.answer)), 'm')!) as Record<string, unknown>;
    const viaStream = converted(geminiParallel, 100_000);
    expect(viaJson.content).toEqual(PARIS_ROME);
    expect([viaStream.content, viaStream.stop_reason]).toEqual([viaJson.content, viaJson.stop_reason]);
  });

  // Review messages: 'not json at all' as partial_json made the Anthropic SDK's finalMessage() throw;
  // [1,2] gave input [1,2] streamed and {} unstreamed.
  it.each(SIZES)('arguments that are no JSON object leave the input {} as the unstreamed answer has it; one object run on by another keeps the first (chunks of %i bytes)', async (size) => {
    const withArguments = (args: string) => streamOf(chatChunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: args } }] }), chatChunk({}, 'tool_calls'));
    for (const [args, input] of [['not json at all', {}], ['[1,2]', {}], ['42', {}], [' \n {"a":[1,{"b":"}"}]}', { a: [1, { b: '}' }] }], ['{"a":1}{"b":2}', { a: 1 }]] as const) {
      const final = await MessageStream.fromReadableStream(asJsonLines(feed(new ChatToAnthropicStream('m'), withArguments(args), size))).finalMessage();
      expect(final.content, args).toEqual([{ type: 'tool_use', id: 'call_1', name: 'f', input }]);
      expect(final.stop_reason).toBe('tool_use');
      const unstreamed = JSON.parse(chatToMessage(Buffer.from(JSON.stringify(chunksAsCompletion(withArguments(args))!.answer)), 'm')!) as { content: unknown[] };
      if (args !== '{"a":1}{"b":2}') expect(unstreamed.content).toEqual(final.content);
    }
  });

  it('two calls in one delta with the same index are two blocks', () => {
    const stream = streamOf(chatChunk({ tool_calls: [{ index: 0, ...call('call_1', 'Paris') }, { index: 0, ...call('call_2', 'Rome') }] }), chatChunk({}, 'tool_calls'));
    expect(converted(stream, 100_000).content).toEqual(PARIS_ROME);
  });

  it('a delta without an id, or with the open call\'s id again, or an empty one, continues the open call', () => {
    const stream = streamOf(
      chatChunk({ tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
      chatChunk({ tool_calls: [{ function: { arguments: '{"city":' } }] }),
      chatChunk({ tool_calls: [{ id: 'call_1', function: { arguments: '"Par' } }] }),
      chatChunk({ tool_calls: [{ id: '', index: 0, function: { arguments: 'is"}' } }] }),
      chatChunk({ tool_calls: [call('call_2', 'Rome')] }),
      chatChunk({}, 'tool_calls'),
    );
    expect(converted(stream, 100_000).content).toEqual(PARIS_ROME);
  });

  it('"stop", or no finish_reason, is tool_use after tool calls and end_turn after text alone; length and content_filter stand', () => {
    const calls = chatChunk({ tool_calls: [call('call_1', 'Paris')] });
    const stopOf = (...chunks: string[]) => converted(streamOf(...chunks), 100_000).stop_reason;
    expect(stopOf(calls)).toBe('tool_use');
    expect(stopOf(chatChunk({ content: 'Let me look.' }), calls, chatChunk({}, 'stop'))).toBe('tool_use');
    expect(stopOf(chatChunk({ content: 'Hi' }), chatChunk({}, 'stop'))).toBe('end_turn');
    expect(stopOf(chatChunk({ content: 'Hi' }))).toBe('end_turn');
    expect(stopOf(calls, chatChunk({}, 'length'))).toBe('max_tokens');
    expect(stopOf(calls, chatChunk({}, 'content_filter'))).toBe('refusal');
  });

  it('a Chat Completion of tool calls with finish_reason "stop" or none is a Message with stop_reason tool_use; of text, end_turn', () => {
    const stopOf = (message: unknown, finish?: string) =>
      (JSON.parse(chatToMessage(Buffer.from(JSON.stringify({ id: 'chatcmpl-1', choices: [{ message, finish_reason: finish }] })), 'm')!) as { stop_reason: string }).stop_reason;
    const tools = { content: null, tool_calls: [call('call_1', 'Paris'), call('call_2', 'Rome')] };
    expect(stopOf(tools, 'stop')).toBe('tool_use');
    expect(stopOf(tools)).toBe('tool_use');
    expect(stopOf(tools, 'length')).toBe('max_tokens');
    expect(stopOf({ content: 'Hi' }, 'stop')).toBe('end_turn');
    expect(stopOf({ content: 'Hi', tool_calls: [] }, 'stop')).toBe('end_turn');
  });
});

describe('ChatUsageFilter', () => {
  it.each(SIZES)('chunks of %i bytes: the usage chunk is left out, and the "usage":null of every other chunk, the rest unchanged', (size) => {
    expect(feed(new ChatUsageFilter(), chatStream, size)).toBe(chatStream.toString().replace(chatUsage, '').replaceAll(',"usage":null', ''));
  });

  it('passes a chunk without a usage key as the same buffer, uncopied', () => {
    const chunk = Buffer.from(chatChunk({ content: 'x' }).replace(',"usage":null', ''));
    expect(new ChatUsageFilter().push(chunk)).toBe(chunk);
    // "usage" as a string value is no key: the chunk passes unchanged.
    const value = Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"usage"}}]}\n\n');
    expect(new ChatUsageFilter().push(value).toString()).toBe(value.toString());
  });

  it('removes a usage the provider attached to a chunk with choices (the finish_reason\'s), and a null one wherever its key stands, spaced or not', () => {
    const filter = new ChatUsageFilter();
    const finish = 'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}}\n\n';
    expect(filter.push(Buffer.from(finish)).toString()).toBe('data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n');
    const lines = [
      ['data: {"usage":null,"id":"c","choices":[]}', 'data: {"id":"c","choices":[]}'],
      ['data: {"usage": null, "id": "c"}', 'data: {"id": "c"}'],
      ['data: {"id": "c", "usage": null}', 'data: {"id": "c"}'],
      ['data: {"id":"c","usage":null,"choices":[]}', 'data: {"id":"c","choices":[]}'],
      ['data: {"usage":null}', 'data: {}'],
    ];
    for (const [line, out] of lines) expect(new ChatUsageFilter().push(Buffer.from(`${line}\n\n`)).toString()).toBe(`${out}\n\n`);
    // A chunk of such lines is copied without them, not decoded: bytes out.
    const several = Buffer.from(lines.map(([line]) => `${line}\n\n`).join(''));
    const cut = new ChatUsageFilter().push(several);
    expect(Buffer.isBuffer(cut)).toBe(true);
    expect(cut.toString()).toBe(lines.map(([, out]) => `${out}\n\n`).join(''));
    // What is left is JSON the client's SDK reads.
    for (const [, out] of lines) expect(() => JSON.parse(out!.slice(5)) as unknown).not.toThrow();
  });
});

describe('ChatStreamMeter', () => {
  it('reads an error chunk, and text with escapes and quotes in place', () => {
    const texts: string[] = [];
    const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => texts.push(buf.toString('utf8', start, end)) });
    meter.push(Buffer.from(chatChunk({ content: 'say "content":"x" \\ done' }) + 'data: {"error":{"message":"boom","type":"server_error"}}\n\n'));
    expect(texts).toEqual([JSON.stringify('say "content":"x" \\ done').slice(1, -1)]);
    expect(meter.error).toEqual({ type: 'server_error', message: 'boom' });
    expect(meter.sawMessageDelta).toBe(false);
  });

  it.each(SIZES)('chunks of %i bytes: JSON written with spaces after its colons and commas (Python\'s json.dumps) reads the same', (size) => {
    // Every `"key":` of the compact stream as `"key": `, every `,"` as `, "`, as json.dumps writes them.
    const spaced = Buffer.from(chatStream.toString('utf8').replace(/"(\w+)":/g, '"$1": ').replace(/,"/g, ', "'));
    expect(spaced.toString()).toContain('"usage": {"prompt_tokens": 20');
    const delivered: string[] = [];
    const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => delivered.push(JSON.parse(`"${buf.toString('utf8', start, end)}"`) as string) });
    for (let i = 0; i < spaced.length; i += size) meter.push(spaced.subarray(i, i + size));
    expect(meter).toMatchObject({ inputTokens: 14, cacheReadTokens: 6, outputTokens: 4, sawMessageDelta: true, sawMessageStop: true, contentDeltas: 4 });
    expect(delivered.join('')).toBe('Héllo{"a":1}');
    const errorMeter = new ChatStreamMeter();
    errorMeter.push(Buffer.from('data: {"error": {"message": "boom", "type": "server_error"}}\n\n'));
    expect(errorMeter.error).toEqual({ type: 'server_error', message: 'boom' });
    // A client that did not ask for the usage is not sent its chunk, spaced or not.
    const filter = new ChatUsageFilter();
    let out = '';
    for (let i = 0; i < spaced.length; i += size) out += filter.push(spaced.subarray(i, i + size)).toString();
    expect(out).not.toContain('prompt_tokens');
    expect(out).toContain('data: [DONE]');
  });

  it.each(SIZES)('chunks of %i bytes: usage with the cached tokens apart, the end, the deltas', (size) => {
    const delivered: string[] = [];
    const meter = new ChatStreamMeter({
      pushDelta: () => { throw new Error('a Chat Completions stream hands over text, not Anthropic payloads'); },
      pushText: (buf, start, end) => delivered.push(JSON.parse(`"${buf.toString('utf8', start, end)}"`) as string),
    });
    for (let i = 0; i < chatStream.length; i += size) meter.push(chatStream.subarray(i, i + size));
    expect(meter).toMatchObject({ inputTokens: 14, cacheReadTokens: 6, outputTokens: 4, sawMessageStart: true, sawMessageDelta: true, sawMessageStop: true, contentDeltas: 4, error: null });
    expect(delivered.join('')).toBe('Héllo{"a":1}');
  });
});

describe('the text an answer without usage delivers (counted by the relay)', () => {
  it('takes every choice\'s text, reasoning and tool-call arguments, and every block\'s text, thinking and tool input', () => {
    const chat = { choices: [{ message: { content: 'a', reasoning_content: 'r', tool_calls: [{ function: { name: 'f', arguments: '{"x":1}' } }] } }, { message: { content: [{ type: 'text', text: 'b' }] } }, null] };
    expect(textOfChatBody(Buffer.from(JSON.stringify(chat)))).toBe('a\nr\n{"x":1}\nb');
    const message = { content: [{ type: 'text', text: 'a' }, { type: 'thinking', thinking: 't' }, { type: 'tool_use', id: 'x', name: 'f', input: { q: 1 } }] };
    expect(textOfMessageBody(Buffer.from(JSON.stringify(message)))).toBe('a\nt\n{"q":1}');
    for (const body of ['not json', '{"choices":1}', 'null', '[]']) {
      expect(textOfChatBody(Buffer.from(body))).toBeNull();
      expect(textOfMessageBody(Buffer.from(body))).toBeNull();
    }
  });
});

describe('chatToMessages', () => {
  const chat = (extra: Partial<ChatRequest>): ChatRequest => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra }) as ChatRequest;

  it('joins system and developer messages, merges tool results into one user turn, maps the tools', () => {
    const out = chatToMessages(chat({
      messages: [
        { role: 'system', content: 'A' },
        { role: 'user', content: 'q' },
        { role: 'developer', content: [{ type: 'text', text: 'B' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } }, { id: 't2', type: 'function', function: { name: 'f', arguments: '' } }] },
        { role: 'tool', tool_call_id: 't1', content: 'r1' },
        { role: 'tool', tool_call_id: 't2', content: [{ type: 'text', text: 'r2' }] },
        { role: 'user', content: 'next' },
      ],
      tools: [{ type: 'function', function: { name: 'f' } }],
      tool_choice: 'auto',
      stream: true,
    })) as MessagesRequest;
    expect(out).toEqual({
      model: 'm', max_tokens: DEFAULT_MAX_TOKENS, stream: true, system: 'A\n\nB',
      tools: [{ name: 'f', input_schema: { type: 'object', properties: {} } }],
      tool_choice: { type: 'auto' },
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'q' }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }, { type: 'tool_use', id: 't2', name: 'f', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'r1' }, { type: 'tool_result', tool_use_id: 't2', content: 'r2' }, { type: 'text', text: 'next' }] },
      ],
    });
  });

  it('carries cache_control to the block or tool its part or tool becomes; a system or tool message with one as blocks, a part a block; without one a string as ever', () => {
    const mark = { type: 'ephemeral' };
    const hour = { type: 'ephemeral', ttl: '1h' };
    // In the order Anthropic takes (tools, system, messages): an hour's marks before 5 minutes'.
    const out = chatToMessages(chat({
      messages: [
        { role: 'developer', content: [{ type: 'text', text: 'A', cache_control: hour }, { type: 'text', text: 'B', cache_control: hour }, { type: 'text', text: ' ' }] },
        { role: 'system', content: 'C' },
        { role: 'user', content: [
          { type: 'text', text: 'q', cache_control: mark },
          { type: 'image_url', image_url: { url: 'https://x/y.png' }, cache_control: mark },
          { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBE' }, cache_control: mark },
          { type: 'text', text: 'no mark', cache_control: 'not an object' },
        ] },
        { role: 'assistant', content: [{ type: 'text', text: 'a', cache_control: mark }], tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 't1', content: [{ type: 'text', text: 'r1' }, { type: 'text', text: 'r2', cache_control: mark }] },
      ] as ChatRequest['messages'],
      tools: [{ type: 'function', function: { name: 'f' }, cache_control: hour }] as ChatRequest['tools'],
    })) as MessagesRequest;
    // Each marked part keeps its own mark (joined, [A 1h, B 5m] became one 5-minute cache of A and B).
    expect(out.system).toEqual([{ type: 'text', text: 'A', cache_control: hour }, { type: 'text', text: 'B', cache_control: hour }, { type: 'text', text: 'C' }]);
    expect(out.tools).toEqual([{ name: 'f', input_schema: { type: 'object', properties: {} }, cache_control: hour }]);
    expect(out.messages).toEqual([
      { role: 'user', content: [
        { type: 'text', text: 'q', cache_control: mark },
        { type: 'image', source: { type: 'url', url: 'https://x/y.png' }, cache_control: mark },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' }, cache_control: mark },
        { type: 'text', text: 'no mark' },
      ] },
      { role: 'assistant', content: [{ type: 'text', text: 'a', cache_control: mark }, { type: 'tool_use', id: 't1', name: 'f', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'r1' }, { type: 'text', text: 'r2', cache_control: mark }] }] },
    ]);
    // System messages alone become the user's turn, with their breakpoints.
    const only = chatToMessages(chat({ messages: [{ role: 'system', content: [{ type: 'text', text: 'S', cache_control: mark }] }] as ChatRequest['messages'] })) as MessagesRequest;
    expect(only.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'S', cache_control: mark }] }]);
  });

  it('max_completion_tokens wins over max_tokens; a PDF file part becomes a document', () => {
    const out = chatToMessages(chat({
      max_tokens: 10, max_completion_tokens: 20,
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: 'data:application/pdf;base64,JVBE' } }] }],
    })) as MessagesRequest;
    expect(out.max_tokens).toBe(20);
    expect(out.messages[0]!.content).toEqual([{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } }]);
  });

  it('carries what OpenAI accepts and Anthropic would refuse in the form Anthropic takes', () => {
    // Whitespace stop sequences (Anthropic: "each stop sequence must contain non-whitespace") are left out.
    expect((chatToMessages(chat({ stop: ['\n', '', 'END', ' \t'] })) as MessagesRequest).stop_sequences).toEqual(['END']);
    expect(chatToMessages(chat({ stop: '\n' })) as MessagesRequest).not.toHaveProperty('stop_sequences');
    expect((chatToMessages(chat({ stop: 'STOP' })) as MessagesRequest).stop_sequences).toEqual(['STOP']);
    // tool_choice none takes no disable_parallel_tool_use (Anthropic's ToolChoiceNone has only its type).
    const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }] as ChatRequest['tools'];
    const none = chatToMessages(chat({ tools, tool_choice: 'none', parallel_tool_calls: false })) as MessagesRequest;
    expect(none.tool_choice).toEqual({ type: 'none' });
    expect((chatToMessages(chat({ tools, tool_choice: 'required', parallel_tool_calls: false })) as MessagesRequest).tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    // A schema without its type gets type object, which Anthropic requires of input_schema.
    expect(none.tools).toEqual([{ name: 'f', input_schema: { type: 'object' } }]);
    // temperature and top_p both: temperature alone (current Claude models refuse the pair).
    const both = chatToMessages(chat({ temperature: 0.7, top_p: 0.9 })) as MessagesRequest;
    expect([both.temperature, both.top_p]).toEqual([0.7, undefined]);
    expect((chatToMessages(chat({ top_p: 0.9 })) as MessagesRequest).top_p).toBe(0.9);
    // user is sent as an opaque id (Anthropic refuses an e-mail address in metadata.user_id), the same for the same user.
    const a = chatToMessages(chat({ user: 'alice@example.com' })) as MessagesRequest;
    expect((a.metadata as { user_id?: string } | undefined)?.user_id).toMatch(/^[0-9a-f]{64}$/);
    expect((chatToMessages(chat({ user: 'alice@example.com' })) as MessagesRequest).metadata).toEqual(a.metadata);
    // A tool call whose arguments are not a JSON object (cut short at finish_reason length) is sent back with empty input.
    const cut = chatToMessages(chat({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"path": "/tm' } }, { id: 'd', type: 'function', function: { name: 'f', arguments: '[1]' } }] }, { role: 'tool', tool_call_id: 'c', content: 'r' }, { role: 'tool', tool_call_id: 'd', content: 'r' }] })) as MessagesRequest;
    // Sent as {} to an Anthropic channel (the body's JSON); counted as the text an OpenAI-format channel is sent.
    expect(JSON.parse(JSON.stringify(cut)).messages[1].content).toEqual([{ type: 'tool_use', id: 'c', name: 'f', input: {} }, { type: 'tool_use', id: 'd', name: 'f', input: {} }]);
    expect(JSON.parse(countedForm(cut)).messages[1].content).toEqual([{ type: 'tool_use', id: 'c', name: 'f', input: '{"path": "/tm' }, { type: 'tool_use', id: 'd', name: 'f', input: '[1]' }]);
    // A request of system messages alone: their text as the user's turn.
    const only = chatToMessages(chat({ messages: [{ role: 'system', content: 'only a system message' }] })) as MessagesRequest;
    expect([only.system, only.messages]).toEqual([undefined, [{ role: 'user', content: [{ type: 'text', text: 'only a system message' }] }]]);
    // data:image/jpg is JPEG, named as Anthropic names it.
    const jpg = chatToMessages(chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/jpg;base64,AAA', detail: 'low' } }] }] })) as MessagesRequest;
    expect(jpg.messages[0]!.content).toEqual([{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: 'AAA' } }]);
    // A data URL with parameters (a browser's FileReader names the charset or file), or its type in capitals: its base64 data (review imagesoak: 400 "must be base64").
    const withParams = chatToMessages(chat({ messages: [{ role: 'user', content: [
      { type: 'image_url', image_url: { url: 'data:image/PNG;charset=utf-8;name=shot.png;base64,QUJD' } },
      { type: 'file', file: { file_data: 'data:application/pdf;name=report.pdf;base64,JVBE' } },
    ] }] as ChatRequest['messages'] })) as MessagesRequest;
    expect(withParams.messages[0]!.content).toEqual([
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'QUJD' } },
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } },
    ]);
    // What has no price is refused as not served, whatever the channel (it read "not converted for this model's provider" to a client of an OpenAI model).
    const refusal = (content: unknown[], role = 'user') => (chatToMessages(chat({ messages: [{ role, content }] as ChatRequest['messages'] })) as RelayError).message;
    expect(refusal([{ type: 'input_audio', input_audio: { data: 'x', format: 'wav' } }])).toBe('messages.0.content.0.type: content parts of type "input_audio" are not served by this gateway (audio tokens are priced apart from text, at a price it does not have)');
    expect(refusal([{ type: 'hologram' }])).toBe('messages.0.content.0.type: content parts of type "hologram" are not served by this gateway (it prices text, images and PDF files)');
    expect(refusal([{ type: 'image_url', image_url: { url: 'https://x/y.png' } }], 'assistant')).toMatch(/"image_url" are not served by this gateway in this role/);
    expect(refusal([{ type: 'file', file: { file_id: 'file-1' } }])).toMatch(/^messages\.0\.content\.0\.file: only file_data as a base64 data URL is served/);
    // Still not base64: refused.
    expect(chatToMessages(chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;charset=utf-8,plain' } }] }] as ChatRequest['messages'] }))).toBeInstanceOf(RelayError);
  });

  it('refuses what it cannot carry', () => {
    // No message with content converts (an OpenAI-format provider answers it), and an Anthropic channel refuses it.
    const empty = chat({ messages: [{ role: 'system', content: '' }] });
    const priced = chatToMessages(empty) as MessagesRequest;
    expect(priced.messages).toEqual([]);
    expect(anthropicOnlyRefusal(empty, priced)).toBeInstanceOf(RelayError);
    expect(chatToMessages(chat({ tool_choice: 'sometimes', tools: [{ type: 'function', function: { name: 'f' } }] }))).toBeInstanceOf(RelayError);
    expect(chatToMessages(chat({ tools: [{ type: 'custom', custom: { name: 'g' } }] }))).toBeInstanceOf(RelayError);
    // Arguments nested past what a body may nest: refused, not a converted body JSON.stringify cannot write (a 500).
    const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const withArguments = (args: string) => chatToMessages(chat({ messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] }] as ChatRequest['messages'] }));
    for (const levels of [121, 20_000]) {
      const deep = withArguments(nested(levels)) as RelayError;
      expect(deep).toBeInstanceOf(RelayError);
      expect([deep.status, deep.param, deep.message]).toEqual([400, 'messages.[1].tool_calls.[0].function.arguments', 'messages.1.tool_calls.0.function.arguments: nests objects and arrays more than 120 levels deep']);
    }
    expect(withArguments(`[${nested(20_000)}]`)).toBeInstanceOf(RelayError);
    const deepest = withArguments(nested(120)) as MessagesRequest;
    expect(JSON.stringify(deepest)).toContain(nested(120));
  });

  it('refuses, as OpenAI does, stream_options without stream and a tool call demanded without tools (a text was answered)', () => {
    const refusal = (extra: Partial<ChatRequest>) => {
      const out = chatToMessages(chat(extra));
      return out instanceof RelayError ? { status: out.status, param: out.param, message: out.message } : 'converted';
    };
    expect(refusal({ stream_options: { include_usage: true } })).toEqual({ status: 400, param: 'stream_options', message: 'stream_options: only allowed when stream is true' });
    expect(refusal({ stream: false, stream_options: { include_usage: false } })).toMatchObject({ param: 'stream_options' });
    expect(refusal({ stream: true, stream_options: { include_usage: true } })).toBe('converted');
    expect(refusal({ stream_options: null })).toBe('converted');
    for (const tool_choice of ['required', { type: 'function', function: { name: 'f' } }, { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [] } }] as const) {
      expect(refusal({ tool_choice })).toEqual({ status: 400, param: 'tool_choice', message: 'tool_choice: only allowed when tools are specified' });
      expect(refusal({ tool_choice, tools: [] })).toMatchObject({ param: 'tool_choice' });
    }
    // A choice that asks for no call, without tools, is what the request does anyway.
    expect(refusal({ tool_choice: 'auto' })).toBe('converted');
    expect(refusal({ tool_choice: 'none' })).toBe('converted');
    expect(refusal({ tool_choice: 'required', tools: [{ type: 'function', function: { name: 'f' } }] })).toBe('converted');
  });
});

describe('a conversation ending with an assistant message (a prefill to Anthropic)', () => {
  const turnsOf = (messages: unknown[]) => (chatToMessages({ model: 'm', messages } as ChatRequest) as MessagesRequest).messages;
  it('loses its trailing whitespace, which Anthropic refuses; one of whitespace alone is dropped', () => {
    expect(turnsOf([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'The answer is \n' }]))
      .toEqual([{ role: 'user', content: [{ type: 'text', text: 'q' }] }, { role: 'assistant', content: [{ type: 'text', text: 'The answer is' }] }]);
    expect(turnsOf([{ role: 'user', content: 'q' }, { role: 'assistant', content: '  ' }])).toEqual([{ role: 'user', content: [{ type: 'text', text: 'q' }] }]);
    // Only the final turn: an earlier assistant message keeps its text as it is.
    expect(turnsOf([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a ' }, { role: 'user', content: 'q2' }])[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'a ' }] });
  });
});

// Anthropic refuses a text block of whitespace alone anywhere (400 "messages: text content blocks must
// contain non-whitespace text"); OpenAI takes it. Before: only '' was dropped, so a user's "\n", an
// assistant's "\n\n" before its tool calls or a " " part beside an image reached Anthropic as a block.
describe('whitespace-only text (refused by Anthropic in any block)', () => {
  const bodyOf = (messages: unknown[], extra: Record<string, unknown> = {}) => chatToMessages({ model: 'm', messages, ...extra } as ChatRequest) as MessagesRequest;
  const turnsOf = (messages: unknown[]) => bodyOf(messages).messages;
  const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });
  const text = (t: string) => ({ type: 'text', text: t });
  // Every whitespace JavaScript's trim() knows, and what Python's str.isspace() adds (\x1c-\x1f, \x85).
  const BLANKS = ['\n', '\n\n', ' ', '\t \r\n', '\u00a0', '\u2028\u3000', '\ufeff', '\x1c\x1f', '\x85'];

  it('is dropped beside other content: an assistant\'s text before its tool calls, a part beside an image, a refusal', () => {
    for (const blank of BLANKS) {
      expect(turnsOf([
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: blank, tool_calls: [call('c1')] },
        { role: 'tool', tool_call_id: 'c1', content: 'Sunny' },
      ])[1]).toEqual({ role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'f', input: {} }] });
      expect(turnsOf([{ role: 'user', content: [text(blank), { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } }, text(blank)] }]))
        .toEqual([{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }] }]);
      expect(turnsOf([{ role: 'user', content: 'q' }, { role: 'assistant', content: [text('a'), { type: 'refusal', refusal: blank }, text(blank)] }, { role: 'user', content: 'q2' }])[1])
        .toEqual({ role: 'assistant', content: [text('a')] });
    }
    // Text with something in it keeps its whitespace (Anthropic trims nothing but a final assistant turn).
    expect(turnsOf([{ role: 'user', content: ' hi \n' }])).toEqual([{ role: 'user', content: [text(' hi \n')] }]);
  });

  it('a user message of whitespace alone after an assistant turn stands as "..." (new-api\'s placeholder): the conversation still ends on the user, not as a prefill', () => {
    for (const blank of BLANKS) {
      const turns = turnsOf([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: blank }]);
      expect(turns).toEqual([{ role: 'user', content: [text('Hi')] }, { role: 'assistant', content: [text('Hello.')] }, { role: 'user', content: [text('...')] }]);
    }
    // As the first message, before an assistant turn: the conversation still opens with the user.
    expect(turnsOf([{ role: 'user', content: [text(' ')] }, { role: 'assistant', content: 'A' }, { role: 'user', content: 'q' }]))
      .toEqual([{ role: 'user', content: [text('...')] }, { role: 'assistant', content: [text('A')] }, { role: 'user', content: [text('q')] }]);
    // '' is blank as well (before: dropped, which left the assistant's message last, a prefill).
    expect(turnsOf([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: '' }]).at(-1)).toEqual({ role: 'user', content: [text('...')] });
    // thinking is asked as for any conversation that ends on the user's turn.
    expect(bodyOf([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: '\n' }], { reasoning_effort: 'low', max_tokens: 8000 }).thinking).toEqual({ type: 'enabled', budget_tokens: 1024 });
  });

  it('a user message of whitespace alone within a user turn that has content adds nothing; an assistant message of whitespace alone is dropped', () => {
    // After tool results, and before a user message: the turn has content without it.
    expect(turnsOf([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: null, tool_calls: [call('c1')] },
      { role: 'tool', tool_call_id: 'c1', content: 'r' },
      { role: 'user', content: '\n' },
    ])[2]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1', content: 'r' }] });
    expect(turnsOf([{ role: 'user', content: ' ' }, { role: 'user', content: 'q' }])).toEqual([{ role: 'user', content: [text('q')] }]);
    // An assistant message of nothing, between two user messages: the user's turns merge, as Anthropic would merge them.
    expect(turnsOf([{ role: 'user', content: 'q' }, { role: 'assistant', content: '\n' }, { role: 'user', content: 'q2' }]))
      .toEqual([{ role: 'user', content: [text('q'), text('q2')] }]);
    expect(turnsOf([{ role: 'user', content: 'q' }, { role: 'assistant', content: '\n' }, { role: 'user', content: '\n' }]))
      .toEqual([{ role: 'user', content: [text('q')] }]);
  });

  it('a conversation with nothing but whitespace has no turn, and an Anthropic channel still refuses it (400), as it refuses one of \'\' alone', () => {
    const blank = { model: 'm', messages: [{ role: 'user', content: '\n' }, { role: 'assistant', content: ' ' }, { role: 'user', content: [text('\t')] }] } as ChatRequest;
    const body = chatToMessages(blank) as MessagesRequest;
    expect(body.messages).toEqual([]);
    expect(anthropicOnlyRefusal(blank, body)).toBeInstanceOf(RelayError);
    // System messages and a blank user message: the system text is the user's turn, as for system messages alone.
    expect(bodyOf([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: ' ' }])).toMatchObject({ messages: [{ role: 'user', content: [text('Be brief.')] }] });
  });

  it('a system message and a tool result of whitespace alone carry no text block either', () => {
    const body = bodyOf([
      { role: 'system', content: 'A' }, { role: 'developer', content: '\n' }, { role: 'system', content: [text(' ')] },
      { role: 'user', content: 'q' },
      { role: 'assistant', content: null, tool_calls: [call('c1'), call('c2')] },
      { role: 'tool', tool_call_id: 'c1', content: '\n' },
      { role: 'tool', tool_call_id: 'c2', content: '' },
    ]);
    expect(body.system).toBe('A');
    // content is optional in a tool_result: left out, as no text block of whitespace can be refused.
    expect(body.messages[2]).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1' }, { type: 'tool_result', tool_use_id: 'c2' }] });
  });
});

// Anthropic takes a tool_use id only in ^[a-zA-Z0-9_-]+$ (400 "tool_use.id: String should match
// pattern"); OpenAI takes any string, and histories from other providers carry ids such as Kimi's
// "functions.get_weather:0". Before: passed as they were.
describe('tool call ids (Anthropic\'s pattern, each tool_result matched to its tool_use)', () => {
  const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/;
  const call = (id: string) => ({ id, type: 'function', function: { name: 'f', arguments: '{}' } });
  const blocksOf = (messages: unknown[]) => (chatToMessages({ model: 'm', messages } as ChatRequest) as MessagesRequest).messages
    .flatMap((m) => m.content as Array<{ type: string; id?: string; tool_use_id?: string }>);
  const pairs = (messages: unknown[]) => {
    const blocks = blocksOf(messages);
    return { uses: blocks.filter((b) => b.type === 'tool_use').map((b) => b.id!), results: blocks.filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id!) };
  };
  const roundTrip = (ids: string[], resultIds = ids) => [
    { role: 'user', content: 'q' },
    { role: 'assistant', content: null, tool_calls: ids.map(call) },
    ...resultIds.map((id) => ({ role: 'tool', tool_call_id: id, content: 'r' })),
  ];

  it('an id outside the pattern has its other characters replaced by _, in its tool_use and its tool_result alike', () => {
    for (const [id, mapped] of [['functions.get_weather:0', 'functions_get_weather_0'], ['call.1', 'call_1'], ['call 1', 'call_1'], ['tool/1', 'tool_1'], ['é🙂', '___']]) {
      expect(pairs(roundTrip([id!]))).toEqual({ uses: [mapped], results: [mapped] });
    }
    // An id that matches goes as it is.
    expect(pairs(roundTrip(['toolu_01A-b', 'call_abc']))).toEqual({ uses: ['toolu_01A-b', 'call_abc'], results: ['toolu_01A-b', 'call_abc'] });
  });

  it('ids that would collide stay distinct, each result matched to its own call, the same every time the conversation is sent', () => {
    const messages = roundTrip(['call.1', 'call:1', 'call_1', 'call_1_2'], ['call_1', 'call:1', 'call_1_2', 'call.1']);
    const { uses, results } = pairs(messages);
    expect(uses).toEqual(['call_1', 'call_1_2', 'call_1_3', 'call_1_2_2']);
    expect(results).toEqual(['call_1_3', 'call_1_2', 'call_1_2_2', 'call_1']);
    for (const id of uses) expect(id).toMatch(ANTHROPIC_ID);
    expect(pairs(messages)).toEqual({ uses, results });
    // The conversation going on keeps the ids it was sent with (a cached prefix stays the same).
    const longer = [...messages, { role: 'assistant', content: null, tool_calls: [call('functions.f:1')] }, { role: 'tool', tool_call_id: 'functions.f:1', content: 'r' }];
    expect(pairs(longer)).toEqual({ uses: [...uses, 'functions_f_1'], results: [...results, 'functions_f_1'] });
  });

  it('an id used again by a later call (Anthropic refuses duplicate tool_use ids) is made distinct; results go to the latest call of that id', () => {
    const messages = [
      ...roundTrip(['functions.f:0']),
      { role: 'assistant', content: null, tool_calls: [call('functions.f:0')] },
      { role: 'tool', tool_call_id: 'functions.f:0', content: 'r2' },
    ];
    expect(pairs(messages)).toEqual({ uses: ['functions_f_0', 'functions_f_0_2'], results: ['functions_f_0', 'functions_f_0_2'] });
  });

  it('many calls of one id, or of ids alike but for characters outside the pattern, are each given a distinct id in one pass', () => {
    const ids: string[] = Array.from({ length: 20_000 }, (_, i) => (i % 3 === 0 ? 'a.' : i % 3 === 1 ? 'a,' : 'a'));
    ids.push('a_5', 'a_2_2');
    const { uses } = pairs(roundTrip(ids, []));
    expect(new Set(uses).size).toBe(uses.length);
    expect(uses.slice(0, 4)).toEqual(['a_', 'a__2', 'a', 'a__3']);
    for (const id of uses) expect(id).toMatch(ANTHROPIC_ID);
    // An id another call took already is skipped, not given twice.
    const taken = pairs(roundTrip(['a_3', 'a', 'a', 'a', 'a'], [])).uses;
    expect(taken).toEqual(['a_3', 'a', 'a_2', 'a_4', 'a_5']);
  });

  it('an empty call id gets an id in the pattern (LiteLLM\'s fallback)', () => {
    expect(pairs([{ role: 'user', content: 'q' }, { role: 'assistant', content: null, tool_calls: [call('')] }]).uses).toEqual(['tool_use_id']);
  });
});

describe('reasoning_effort to extended thinking', () => {
  const chat = (extra: Record<string, unknown>): ChatRequest => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8000, ...extra }) as ChatRequest;
  const thinkingOf = (extra: Record<string, unknown>) => (chatToMessages(chat(extra)) as MessagesRequest & { thinking?: unknown }).thinking;

  it('asks for a budget by effort within max_tokens, without temperature or top_p', () => {
    expect([thinkingOf({ reasoning_effort: 'low' }), thinkingOf({ reasoning_effort: 'medium' }), thinkingOf({ reasoning_effort: 'high' }), thinkingOf({ reasoning_effort: 'xhigh' })])
      .toEqual([1024, 2048, 4096, 6000].map((budget_tokens) => ({ type: 'enabled', budget_tokens })));
    // At most three quarters of max_tokens: the rest is the answer's (before: max_tokens − 1, a one-token answer).
    expect(thinkingOf({ reasoning_effort: 'high', max_tokens: 3000 })).toEqual({ type: 'enabled', budget_tokens: 2250 });
    const out = chatToMessages(chat({ reasoning_effort: 'high', temperature: 0.2, top_p: 0.5 })) as MessagesRequest;
    expect(out).not.toHaveProperty('temperature');
    expect(out).not.toHaveProperty('top_p');
    // Without reasoning_effort, temperature passes as before.
    expect(chatToMessages(chat({ temperature: 0.2 }))).toMatchObject({ temperature: 0.2 });
  });

  it('refuses an effort OpenAI does not name, and logprobs that is no boolean (before: ignored, 200)', () => {
    const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
    for (const [extra, message] of [
      [{ reasoning_effort: 'ultra' }, /^reasoning_effort: must be one of "none", "minimal", "low", "medium", "high", "xhigh"/],
      [{ reasoning_effort: 3 }, /^reasoning_effort/], [{ reasoning_effort: 'HIGH' }, /^reasoning_effort/],
      [{ logprobs: 1 }, /^logprobs: must be a boolean/], [{ logprobs: 'yes' }, /^logprobs/],
    ] as const) {
      const refused = anthropicOnlyRefusal({ ...body, ...extra } as ChatRequest, chatToMessages({ ...body, ...extra } as ChatRequest) as MessagesRequest);
      expect(refused?.message, JSON.stringify(extra)).toMatch(message);
    }
    for (const extra of [{ reasoning_effort: null }, { reasoning_effort: 'none' }, { logprobs: false }, { logprobs: null }]) {
      expect(anthropicOnlyRefusal({ ...body, ...extra } as ChatRequest, chatToMessages({ ...body, ...extra } as ChatRequest) as MessagesRequest)).toBeNull();
    }
  });

  it('asks for none where there is no room, no effort, or Anthropic would refuse it', () => {
    for (const extra of [
      { reasoning_effort: 'none' }, { reasoning_effort: 'minimal' }, { reasoning_effort: 'constructor' }, { reasoning_effort: '__proto__' },
      // three quarters of max_tokens is less than Anthropic's minimum budget
      { reasoning_effort: 'high', max_tokens: 1024 }, { reasoning_effort: 'low', max_tokens: 1300 },
      // a forced tool choice
      { reasoning_effort: 'high', tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'required' },
      { reasoning_effort: 'high', tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'f' } } },
      // a turn that goes on from the assistant's: tool results, a prefill
      { reasoning_effort: 'high', messages: [{ role: 'user', content: 'q' }, { role: 'assistant', tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'tool', tool_call_id: 't', content: 'r' }] },
      { reasoning_effort: 'high', messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'The answer is' }] },
    ]) expect(thinkingOf(extra), JSON.stringify(extra)).toBeUndefined();
    // A new user question after a finished tool loop thinks again.
    expect(thinkingOf({ reasoning_effort: 'low', messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }, { role: 'user', content: 'q2' }] })).toEqual({ type: 'enabled', budget_tokens: 1024 });
  });

  it('the thinking of the answer is reasoning_content, streamed and not', () => {
    const message = Buffer.from(JSON.stringify({ id: 'msg_t', content: [{ type: 'thinking', thinking: 'Let me ', signature: 's' }, { type: 'thinking', thinking: 'see.', signature: 's' }, { type: 'text', text: 'Hi' }], stop_reason: 'end_turn', usage: { input_tokens: 3, output_tokens: 9 } }));
    expect(JSON.parse(messageToChat(message, 'm')!).choices[0].message).toEqual({ role: 'assistant', content: 'Hi', refusal: null, annotations: [], reasoning_content: 'Let me see.' });
    // Without thinking there is no such field.
    expect(JSON.parse(messageToChat(Buffer.from(JSON.stringify({ content: [{ type: 'text', text: 'Hi' }] })), 'm')!).choices[0].message).not.toHaveProperty('reasoning_content');
    const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    const stream = Buffer.from(
      sse('message_start', { type: 'message_start', message: { id: 'm1', usage: { input_tokens: 3, output_tokens: 1 } } })
      + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Let me ' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'see.' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } })
      + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
      + sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Hi' } })
      + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } })
      + sse('message_stop', { type: 'message_stop' }));
    const chunks = dataEvents(feed(new AnthropicToChatStream('m', false), stream, 7)).slice(0, -1) as Array<{ choices: Array<{ delta: { content?: string; reasoning_content?: string } }> }>;
    expect(chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? '').join('')).toBe('Let me see.');
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hi');
  });
});

describe('messagesToChat', () => {
  it('refuses an entry that is no object (null, a number, an array) where a block or a tool goes, naming it: it threw (a 500)', () => {
    const base = { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] };
    const toolTurn = (content: unknown) => [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content }] },
    ];
    for (const [body, field] of [
      [{ ...base, tools: [null] }, 'tools.0'],
      [{ ...base, tools: [{ name: 'f', input_schema: { type: 'object' } }, 7] }, 'tools.1'],
      [{ ...base, messages: toolTurn([null]) }, 'messages.2.content.0.content.0'],
      [{ ...base, messages: toolTurn([{ type: 'text', text: 'ok' }, []]) }, 'messages.2.content.0.content.1'],
      [{ ...base, messages: [{ role: 'user', content: [null] }] }, 'messages.0.content.0'],
      [{ ...base, system: [null] }, 'system.0'],
    ] as const) {
      let out: unknown;
      expect(() => { out = messagesToChat(body as unknown as MessagesRequest, 'gpt'); }, field).not.toThrow();
      expect(out, field).toBeInstanceOf(RelayError);
      expect((out as RelayError).message, field).toBe(`${field}: must be an object`);
      expect((out as RelayError).status).toBe(400);
    }
  });

  it('sends structured outputs (output_config.format, or the beta\'s output_format) as response_format json_schema', () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
    const base = { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] };
    for (const extra of [{ output_config: { format: { type: 'json_schema', schema } } }, { output_format: { type: 'json_schema', schema } }]) {
      expect(messagesToChat({ ...base, ...extra } as MessagesRequest, 'gpt')).toMatchObject({ response_format: { type: 'json_schema', json_schema: { name: 'output', schema } } });
    }
    expect(messagesToChat({ ...base, output_config: { effort: 'high' } } as MessagesRequest, 'gpt')).not.toHaveProperty('response_format');
    // Asked for and not carried over, the client would get free text: refused (before: ignored, 200).
    for (const [extra, message] of [
      [{ output_config: { format: { type: 'json_object' } } }, /^output_config\.format\.type: only "json_schema"/],
      [{ output_config: { format: { type: 'json_schema', schema: 'x' } } }, /^output_config\.format\.schema: a JSON Schema object/],
      [{ output_format: { type: 'json_schema' } }, /^output_format\.schema/],
    ] as const) {
      const out = messagesToChat({ ...base, ...extra } as MessagesRequest, 'gpt');
      expect(out).toBeInstanceOf(RelayError);
      expect((out as RelayError).message).toMatch(message);
    }
  });

  it('puts tool results before the rest of their user turn, images as image_url parts', () => {
    const out = messagesToChat({
      model: 'm', max_tokens: 5, system: [{ type: 'text', text: 'S' }],
      messages: [{ role: 'user', content: [
        { type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'r' }] },
        { type: 'text', text: 'look' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAA' } },
      ] }],
      tools: [{ name: 'f', input_schema: { type: 'object' } }],
      tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true },
      metadata: { user_id: 'u1' },
    } as MessagesRequest, 'mapped');
    expect(out).toEqual({
      model: 'mapped', max_tokens: 5, user: 'u1', parallel_tool_calls: false,
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      messages: [
        { role: 'system', content: 'S' },
        { role: 'tool', tool_call_id: 't', content: 'r' },
        { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA' } }] },
      ],
    });
  });

  it('refuses more stop sequences than Chat Completions takes (4), and passes 4', () => {
    const withStops = (n: number) => messagesToChat({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], stop_sequences: Array.from({ length: n }, (_, i) => `s${i}`) } as MessagesRequest, 'm');
    const refused = withStops(5);
    expect(refused).toBeInstanceOf(RelayError);
    expect((refused as RelayError).message).toBe('stop_sequences: at most 4 are served by this model\'s provider');
    expect(withStops(4)).toMatchObject({ stop: ['s0', 's1', 's2', 's3'] });
  });

  it('refuses server tools', () => {
    expect(messagesToChat({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }] } as MessagesRequest, 'm')).toBeInstanceOf(RelayError);
  });

  it('refuses MCP servers (before: left out, the model answered as if it had no tools, 200); none or an empty list passes', () => {
    const withMcp = (mcp_servers: unknown) => messagesToChat({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }], mcp_servers } as MessagesRequest, 'm');
    const refused = withMcp([{ type: 'url', url: 'https://mcp.example.com/sse', name: 'x' }]) as RelayError;
    expect([refused.status, refused.param, refused.message]).toEqual([400, 'mcp_servers', 'mcp_servers: MCP servers are not converted for this model\'s provider']);
    for (const none of [undefined, null, []]) expect(withMcp(none)).not.toBeInstanceOf(RelayError);
  });
});

describe('JSON answers', () => {
  it('a Chat Completion whose content is an array of parts (as some OpenAI-compatible servers answer) keeps its text (before: content [])', () => {
    const parts = Buffer.from(JSON.stringify({ id: 'chatcmpl-8', choices: [{ message: { role: 'assistant', content: [{ type: 'text', text: 'hel' }, { type: 'image_url', image_url: { url: 'x' } }, { type: 'text', text: 'lo' }] }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 2 } }));
    expect(JSON.parse(chatToMessage(parts, 'asked')!)).toMatchObject({ content: [{ type: 'text', text: 'hello' }], stop_reason: 'end_turn' });
  });

  it('an Anthropic Message as a Chat Completion and a Chat Completion as a Message', () => {
    const message = Buffer.from(JSON.stringify({ id: 'msg_5', content: [{ type: 'thinking', thinking: 'hmm' }, { type: 'text', text: 'Hi' }, { type: 'tool_use', id: 'tu', name: 'f', input: { a: 1 } }], stop_reason: 'tool_use', usage: { input_tokens: 3, cache_read_input_tokens: 4, cache_creation_input_tokens: 2, output_tokens: 7 } }));
    expect(JSON.parse(messageToChat(message, 'asked')!)).toMatchObject({
      id: 'chatcmpl-msg_5', object: 'chat.completion', model: 'asked',
      choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: 'Hi', tool_calls: [{ id: 'tu', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] } }],
      usage: { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16, prompt_tokens_details: { cached_tokens: 4 } },
    });
    const completion = Buffer.from(JSON.stringify({ id: 'chatcmpl-7', choices: [{ message: { content: 'Yo', tool_calls: [{ id: 'c', function: { name: 'g', arguments: 'not json' } }] }, finish_reason: 'length' }], usage: { prompt_tokens: 10, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 3 } } }));
    expect(JSON.parse(chatToMessage(completion, 'asked')!)).toEqual({
      id: 'msg_7', type: 'message', role: 'assistant', model: 'asked',
      content: [{ type: 'text', text: 'Yo' }, { type: 'tool_use', id: 'c', name: 'g', input: {} }],
      stop_reason: 'max_tokens', stop_sequence: null, container: null,
      // Every field of the SDK's Usage that Anthropic always sends (nullable), not only the counts.
      usage: {
        input_tokens: 7, cache_creation_input_tokens: 0, cache_read_input_tokens: 3, output_tokens: 2,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 }, server_tool_use: null, service_tier: 'standard',
      },
    });
  });
});

// Before: a data line that opens an object and never closes it had every later data line of its
// event appended to it without limit: 97 MB sent grew the heap 429 MB, 681 MB grew it 2.8 GB. Now the
// joined data is held up to MAX_JOINED_DATA (the 1 MiB the meters and the aligner hold), then the
// converter says it failed and reads nothing more; stream-relay.ts ends the stream as failed.
describe('an event whose data lines never end, through a conversion', () => {
  const FLOOD = 48 * 1024 * 1024;
  const line = 'data: ' + 'x'.repeat(10) + '\n';
  const block = Buffer.from(line.repeat(Math.floor(64 * 1024 / line.length)));
  const cases = [
    ['AnthropicToChatStream', () => new AnthropicToChatStream('m', true), streamHead('msg_1', 'claude-x', usage) + DELTA_EVENT, 'event: content_block_delta\ndata: {"type":"content_block_delta",\n', '"content":"tok "'],
    ['ChatToAnthropicStream', () => new ChatToAnthropicStream('m'), chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'tok ' }), 'data: {"choices":[\n', '"text":"tok "'],
  ] as const;

  for (const [name, make, head, opening, converted] of cases) {
    it(`${name}: fails past MAX_JOINED_DATA, holding no more, and returns what it converted before`, () => {
      const conv = make();
      // The events before the flood, the opening line and more than the bound, in one chunk.
      const first = Buffer.concat([Buffer.from(head + opening), ...Array<Buffer>(Math.ceil(MAX_JOINED_DATA / block.length) + 1).fill(block)]);
      const out = conv.push(first);
      expect(out).toContain(converted);
      expect(conv.failure).toBeInstanceOf(JoinedDataTooLongError);
      expect(conv.push(Buffer.from(DELTA_EVENT + chatChunk({ content: 'tok ' })))).toBe('');
    });

    it(`${name}: ${FLOOD >> 20} MB of data lines in 64 KB chunks: the failure comes within the bound and the heap does not grow with the flood`, () => {
      const conv = make();
      conv.push(Buffer.from(head + opening));
      const before = getHeapStatistics().used_heap_size;
      let sent = 0;
      let failedAt = -1;
      let peak = 0;
      while (sent < FLOOD) {
        expect(conv.push(block)).toBe('');
        sent += block.length;
        if (failedAt < 0 && conv.failure) failedAt = sent;
        if ((sent & (4 * 1024 * 1024 - 1)) < block.length) peak = Math.max(peak, getHeapStatistics().used_heap_size - before);
      }
      expect(failedAt).toBeGreaterThan(MAX_JOINED_DATA - block.length);
      expect(failedAt).toBeLessThanOrEqual(MAX_JOINED_DATA + block.length);
      expect(conv.failure).toBeInstanceOf(JoinedDataTooLongError);
      // Unbounded, the joined string alone is the 48 MB sent (and 100+ MB of heap).
      expect(peak).toBeLessThan(24 * 1024 * 1024);
    });
  }

  it('an event of many data lines within the bound is still joined and converted', () => {
    const conv = new ChatToAnthropicStream('m');
    const out = conv.push(Buffer.from(`data: {"choices":[{"index":0,\ndata: "delta":{"content":"${'y'.repeat(200_000)}"}}]}\n\n`));
    expect(conv.failure ?? null).toBeNull();
    expect(out).toContain('y'.repeat(200_000));
  });
});

/** A converted Anthropic stream's events: `event` name and parsed data. */
function anthropicEvents(sse: string): Array<{ event: string; data: Record<string, unknown> }> {
  return sse.split('\n\n').filter((e) => e !== '').map((e) => ({ event: e.split('\n')[0]!.slice(7), data: JSON.parse(e.split('\n')[1]!.slice(6)) as Record<string, unknown> }));
}

/** The data of each SSE event as the newline-delimited JSON the Anthropic SDK's MessageStream.fromReadableStream reads. */
function asJsonLines(sse: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(anthropicEvents(sse).map((e) => `${JSON.stringify(e.data)}\n`).join(''));
  return new ReadableStream({ start(c) { c.enqueue(bytes); c.close(); } });
}

/**
 * What the Anthropic SDK needs of a stream, checked event by event: message_start first, one block
 * open at a time with indices 0, 1, … in order, deltas to the open block only, a tool_use block with
 * its id and name at its start and arguments that parse, nothing after message_stop or error.
 */
function expectValidAnthropicStream(sse: string): void {
  const events = anthropicEvents(sse);
  expect(events[0]?.event).toBe('message_start');
  let open = -1;
  let next = 0;
  let json = '';
  let tool = false;
  for (let i = 1; i < events.length; i++) {
    const { event, data } = events[i]!;
    if (event === 'error' || event === 'message_stop') {
      expect(i, 'nothing after the stream\'s end').toBe(events.length - 1);
      break;
    }
    if (event === 'content_block_start') {
      expect(open, 'a block opened while another is open').toBe(-1);
      expect(data.index).toBe(next);
      open = next++;
      const block = data.content_block as Record<string, unknown>;
      tool = block.type === 'tool_use';
      if (tool) {
        expect(typeof block.id === 'string' && block.id !== '', 'tool_use id').toBe(true);
        expect(typeof block.name === 'string' && block.name !== '', 'tool_use name').toBe(true);
      }
      json = '';
    } else if (event === 'content_block_delta') {
      expect(data.index).toBe(open);
      const delta = data.delta as Record<string, unknown>;
      if (delta.type === 'input_json_delta') json += delta.partial_json as string;
    } else if (event === 'content_block_stop') {
      expect(data.index).toBe(open);
      if (tool && json !== '') expect(() => JSON.parse(json), json).not.toThrow();
      open = -1;
    } else if (event === 'message_delta') {
      expect(open, 'message_delta with a block open').toBe(-1);
    }
  }
}

// Chat Completions tags each tool-call delta with its `index` so that calls may interleave. Before: a
// delta for a call other than the open block's opened a new block, even for a call whose block was
// closed: `{"a":` / `{"b":` / `1}` / `2}` made 4 blocks, two without id nor name, and the SDK threw
// "Unexpected non-whitespace character after JSON". Now every call is kept by its index; the
// arguments of a call that is not the open block are held and written when its block opens.
describe('ChatToAnthropicStream: interleaved tool calls', () => {
  const tc = (index: number, args: string, id?: string, name?: string) =>
    chatChunk({ tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args } }] });
  const streamOf = (...chunks: string[]) => Buffer.from(chatChunk({ role: 'assistant', content: null }) + chunks.join('') + chatUsage + 'data: [DONE]\n\n');
  const interleaved = streamOf(tc(0, '{"a":', 'call_a', 'f'), tc(1, '{"b":', 'call_b', 'g'), tc(0, '1}'), tc(1, '2}'), chatChunk({}, 'tool_calls'));
  const AB = [
    { type: 'tool_use', id: 'call_a', name: 'f', input: { a: 1 } },
    { type: 'tool_use', id: 'call_b', name: 'g', input: { b: 2 } },
  ];

  it.each(SIZES)('two calls interleaved by index are two whole tool_use blocks (chunks of %i bytes)', (size) => {
    const out = feed(new ChatToAnthropicStream('m'), interleaved, size);
    expectValidAnthropicStream(out);
    const message = eventsAsMessage(Buffer.from(out))!.answer;
    expect(message.content).toEqual(AB);
    expect(message.stop_reason).toBe('tool_use');
  });

  // Found by review: only arguments and text counted toward the bound, and every call stays known by
  // its id and name to the end: 80 calls of 256 KiB ids and names held ~59 MB without a failure.
  it('ids and names of calls count toward the bound: calls of huge ids fail the stream past it', () => {
    const s = new ChatToAnthropicStream('m');
    s.push(Buffer.from(chatChunk({ role: 'assistant', content: null }) + tc(0, '{"a":', 'call_0', 'f')));
    const big = 'x'.repeat(256 * 1024);
    for (let i = 1; i <= 80 && s.failure === null; i++) s.push(Buffer.from(tc(i, '', `${big}${i}`, big)));
    expect(s.failure).toBeInstanceOf(HeldArgumentsTooLongError);
  });

  // Found by review: at a [DONE] without a finish_reason the blocks still held were drained into
  // output that was thrown away, and the stream closed a block that never started.
  it('calls still held at a [DONE] without a finish_reason are written, each block closed once', async () => {
    const stream = Buffer.from(chatChunk({ role: 'assistant', content: null }) + tc(0, '', 'call_a', 'f') + tc(1, '{"y":2}', 'call_b', 'g') + 'data: [DONE]\n\n');
    for (const size of SIZES) {
      const out = feed(new ChatToAnthropicStream('m'), stream, size);
      expectValidAnthropicStream(out);
      const final = await MessageStream.fromReadableStream(asJsonLines(out)).finalMessage();
      expect(final.content.map((b) => (b.type === 'tool_use' ? b.id : b.type))).toEqual(['call_a', 'call_b']);
    }
  });

  it('the Anthropic SDK assembles them (finalMessage threw on the 4 blocks)', async () => {
    const out = feed(new ChatToAnthropicStream('m'), interleaved, 100_000);
    const final = await MessageStream.fromReadableStream(asJsonLines(out)).finalMessage();
    expect(final.content).toEqual(AB);
  });

  it('three calls, text and a name stated late, all interleaved: every argument byte arrives once, in its own block', async () => {
    const stream = streamOf(
      chatChunk({ content: 'Checking.' }),
      tc(0, '{"q":"x', 'call_0', 'f'),
      tc(1, '', 'call_1'), tc(1, '', undefined, 'g'),
      chatChunk({ content: ' One moment.' }),
      tc(2, '{"r":[1,', 'call_2', 'h'),
      tc(1, '{"s":"}{\\"'),
      tc(0, 'y"}'),
      tc(2, '2]}'),
      tc(1, '"}'),
      chatChunk({}, 'tool_calls'),
    );
    for (const size of SIZES) {
      const out = feed(new ChatToAnthropicStream('m'), stream, size);
      expectValidAnthropicStream(out);
      const final = await MessageStream.fromReadableStream(asJsonLines(out)).finalMessage();
      expect(final.content).toEqual([
        { type: 'text', text: 'Checking.', citations: null },
        { type: 'tool_use', id: 'call_0', name: 'f', input: { q: 'xy' } },
        { type: 'tool_use', id: 'call_1', name: 'g', input: { s: '}{"' } },
        { type: 'text', text: ' One moment.', citations: null },
        { type: 'tool_use', id: 'call_2', name: 'h', input: { r: [1, 2] } },
      ].map((b) => (b.type === 'text' ? expect.objectContaining({ type: 'text', text: b.text }) : b)));
      expect(final.stop_reason).toBe('tool_use');
    }
  });

  it('calls one after the other still stream: the next call\'s block opens with its first delta once the open call\'s arguments are whole', () => {
    const conv = new ChatToAnthropicStream('m');
    let out = conv.push(Buffer.from(chatChunk({ role: 'assistant', content: null }) + tc(0, '{"a":', 'call_a', 'f')));
    expect(out).toContain('"partial_json":"{\\"a\\":"');
    out = conv.push(Buffer.from(tc(0, '1}') + tc(1, '{"b":', 'call_b', 'g')));
    expect(anthropicEvents(out).map((e) => e.event)).toEqual(['content_block_delta', 'content_block_stop', 'content_block_start', 'content_block_delta']);
    expect(out).toContain('"partial_json":"{\\"b\\":"');
  });

  it('a stream cut while a call is held: no half block written; the meter, which reads the provider\'s bytes, counts every argument once', () => {
    const cut = Buffer.from(chatChunk({ role: 'assistant', content: null }) + tc(0, '{"a":', 'call_a', 'f') + tc(1, '{"b":', 'call_b', 'g') + tc(1, '2}') + tc(0, '1'));
    const out = new ChatToAnthropicStream('m').push(cut);
    expect(out).not.toContain('call_b');
    expectValidAnthropicStream(out + 'event: message_stop\ndata: {"type":"message_stop"}\n\n');
    for (const size of SIZES) {
      const delivered: string[] = [];
      const meter = new ChatStreamMeter({ pushDelta: () => {}, pushText: (buf, start, end) => delivered.push(JSON.parse(`"${buf.toString('utf8', start, end)}"`) as string) });
      for (let i = 0; i < cut.length; i += size) meter.push(cut.subarray(i, i + size));
      expect(delivered.join('')).toBe('{"a":{"b":2}1');
    }
  });

  it('holds a bounded amount: past MAX_HELD_ARGUMENTS the conversion fails, as an endless event does', () => {
    const conv = new ChatToAnthropicStream('m');
    conv.push(Buffer.from(chatChunk({ role: 'assistant', content: null }) + tc(0, '{"a":', 'call_a', 'f') + tc(1, '{"b":"', 'call_b', 'g')));
    const piece = Buffer.from(tc(1, 'x'.repeat(64 * 1024)));
    let sent = 0;
    while (conv.failure === null && sent <= MAX_HELD_ARGUMENTS + piece.length) {
      conv.push(piece);
      sent += 64 * 1024;
    }
    expect(conv.failure).toBeInstanceOf(Error);
    expect(sent).toBeGreaterThan(MAX_HELD_ARGUMENTS - 64 * 1024);
  });
});

// Before: the error event was followed, at the provider's [DONE], by content_block_stop, a
// message_delta saying end_turn and message_stop: a raw client read a normally completed message.
describe('ChatToAnthropicStream: nothing after an error event', () => {
  it('an error chunk mid-stream ends the converted stream: [DONE] and any later chunk write nothing', () => {
    const conv = new ChatToAnthropicStream('m');
    let out = conv.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'a' }) + chatChunk({ content: 'b' })));
    out += conv.push(Buffer.from(`data: ${JSON.stringify({ error: { message: 'boom', type: 'server_error' } })}\n\n`));
    out += conv.push(Buffer.from(chatChunk({ content: 'c' }) + chatUsage + 'data: [DONE]\n\n'));
    const events = anthropicEvents(out).map((e) => e.event);
    expect(events.at(-1)).toBe('error');
    expect(events.filter((e) => e === 'error')).toHaveLength(1);
    expect(out).not.toContain('"text":"c"');
  });

  it('nothing after message_stop either', () => {
    const conv = new ChatToAnthropicStream('m');
    const out = conv.push(Buffer.from(chatChunk({ content: 'a' }) + 'data: [DONE]\n\n' + chatChunk({ content: 'late' }) + 'data: [DONE]\n\n'));
    expect(anthropicEvents(out).map((e) => e.event).at(-1)).toBe('message_stop');
    expect(out).not.toContain('late');
  });
});

// Before: `data: [DONE]` alone gave message_delta and message_stop with no message_start, and the
// SDK's finalMessage threw "request ended without sending any chunks".
describe('ChatToAnthropicStream: a stream of [DONE] alone', () => {
  it('is an empty message the SDK reads: message_start, message_delta end_turn, message_stop', async () => {
    const out = new ChatToAnthropicStream('asked').push(Buffer.from('data: [DONE]\n\n'));
    expect(anthropicEvents(out).map((e) => e.event)).toEqual(['message_start', 'message_delta', 'message_stop']);
    expectValidAnthropicStream(out);
    const final = await MessageStream.fromReadableStream(asJsonLines(out)).finalMessage();
    expect(final).toMatchObject({ role: 'assistant', model: 'asked', content: [], stop_reason: 'end_turn', usage: { input_tokens: 0, output_tokens: 0 } });
  });
});

// vLLM names the stop string that ended the answer in choices[0].stop_reason, SGLang in
// matched_stop. Before: stop_reason end_turn and stop_sequence null whatever the provider said.
describe('stop_sequences: the matched one when the provider names it', () => {
  const completion = (choice: Record<string, unknown>) => Buffer.from(JSON.stringify({ id: 'chatcmpl-1', choices: [{ index: 0, message: { role: 'assistant', content: 'one two' }, finish_reason: 'stop', ...choice }], usage: { prompt_tokens: 3, completion_tokens: 2 } }));
  const stopOf = (body: Buffer, stops?: string[]) => {
    const m = JSON.parse(chatToMessage(body, 'm', stops)!) as { stop_reason: string; stop_sequence: string | null };
    return [m.stop_reason, m.stop_sequence];
  };
  const streamed = (finish: Record<string, unknown>, stops?: string[]) => {
    const out = new ChatToAnthropicStream('m', stops).push(Buffer.from(chatChunk({ role: 'assistant', content: 'one two' })
      + `data: ${JSON.stringify({ id: 'chatcmpl-1', choices: [{ index: 0, delta: {}, finish_reason: 'stop', ...finish }] })}\n\n` + chatUsage + 'data: [DONE]\n\n'));
    const delta = anthropicEvents(out).find((e) => e.event === 'message_delta')!.data.delta as { stop_reason: string; stop_sequence: string | null };
    return [delta.stop_reason, delta.stop_sequence];
  };

  it('non-streamed: vLLM\'s stop_reason or SGLang\'s matched_stop, one of the request\'s stop_sequences', () => {
    expect(stopOf(completion({ stop_reason: 'three' }), ['three', 'four'])).toEqual(['stop_sequence', 'three']);
    expect(stopOf(completion({ matched_stop: 'four' }), ['three', 'four'])).toEqual(['stop_sequence', 'four']);
    // Not one of the request's (a token id, a stop of the server's own), or no stops asked: end_turn.
    expect(stopOf(completion({ stop_reason: 'zzz' }), ['three'])).toEqual(['end_turn', null]);
    expect(stopOf(completion({ stop_reason: 128009 }), ['three'])).toEqual(['end_turn', null]);
    expect(stopOf(completion({ stop_reason: 'three' }))).toEqual(['end_turn', null]);
    expect(stopOf(completion({ stop_reason: 'three', finish_reason: 'length' }), ['three'])).toEqual(['max_tokens', null]);
    // OpenAI names none: end_turn.
    expect(stopOf(completion({}), ['three'])).toEqual(['end_turn', null]);
  });

  it('streamed: the same from the finish chunk', () => {
    expect(streamed({ stop_reason: 'three' }, ['three'])).toEqual(['stop_sequence', 'three']);
    expect(streamed({ matched_stop: 'three' }, ['three'])).toEqual(['stop_sequence', 'three']);
    expect(streamed({ stop_reason: 'zzz' }, ['three'])).toEqual(['end_turn', null]);
    expect(streamed({ stop_reason: 'three' })).toEqual(['end_turn', null]);
    expect(streamed({}, ['three'])).toEqual(['end_turn', null]);
  });
});

describe('messagesToChat: tool errors and tool_choice', () => {
  const base = { model: 'm', max_tokens: 5, tools: [{ name: 'f', input_schema: { type: 'object' } }] };
  const toolTurn = (result: Record<string, unknown>) => [
    { role: 'user', content: 'a' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', ...result }] },
  ];
  const toolMessage = (result: Record<string, unknown>) => ((messagesToChat({ ...base, messages: toolTurn(result) } as MessagesRequest, 'gpt') as { messages: Array<Record<string, unknown>> }).messages).find((m) => m.role === 'tool');

  it('a tool_result with is_error true reaches the model marked "Error: " (before: dropped, the failure read as a result)', () => {
    expect(toolMessage({ is_error: true, content: 'city not found' })).toEqual({ role: 'tool', tool_call_id: 't1', content: 'Error: city not found' });
    expect(toolMessage({ is_error: true, content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] })!.content).toBe('Error: a\nb');
    expect(toolMessage({ is_error: true })!.content).toBe('Error');
    expect(toolMessage({ is_error: false, content: 'ok' })!.content).toBe('ok');
    expect(toolMessage({ content: 'ok' })!.content).toBe('ok');
  });

  it('refuses a tool_choice of type "tool" without a name, or of a type Anthropic has not, naming the field (before: dropped to auto)', () => {
    for (const [choice, message] of [
      [{ type: 'tool' }, /^tool_choice\.name: /],
      [{ type: 'tool', name: '' }, /^tool_choice\.name: /],
      [{ type: 'tool', name: 7 }, /^tool_choice\.name: /],
      [{ type: 'required' }, /^tool_choice\.type: /],
      [{}, /^tool_choice\.type: /],
      ['auto', /^tool_choice: /],
    ] as const) {
      const out = messagesToChat({ ...base, messages: [{ role: 'user', content: 'x' }], tool_choice: choice } as unknown as MessagesRequest, 'gpt');
      expect(out, JSON.stringify(choice)).toBeInstanceOf(RelayError);
      expect((out as RelayError).message).toMatch(message);
      expect((out as RelayError).status).toBe(400);
    }
    for (const type of ['auto', 'any', 'none']) expect(messagesToChat({ ...base, messages: [{ role: 'user', content: 'x' }], tool_choice: { type } } as MessagesRequest, 'gpt')).not.toBeInstanceOf(RelayError);
  });
});
