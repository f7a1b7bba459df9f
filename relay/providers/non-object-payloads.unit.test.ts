// A provider's JSON that is valid but not the object the protocol promises (`data: null`, `data: 1`,
// `data: "x"`, `data: []`, a body of `null`, `{"choices":null}`, a `null` where an item is due): every
// meter, rewriter and JSON conversion skips it or reads it as absent, and none throws. Thrown inside the
// provider body's 'data' handler, such a line took the relay process down with every user's stream.
import { describe, expect, it } from 'vitest';
import { SseUsageParser, usageOfMessage } from '../stream/sse-usage-parser.js';
import { textOfMessageBody, usageOfMessageBody } from '../messages/message-usage.js';
import { AnthropicToChatStream, messageToChat } from './anthropic/to-chat.js';
import { ChatStreamMeter, textOfChatBody, usageOfChatBody } from './openai/chat-usage.js';
import { ChatToAnthropicStream, chatToMessage, ChatUsageFilter } from './openai/to-messages.js';

const NON_OBJECTS = ['null', '1', '"x"', '[]', 'true', '[null]', '{"type":null}'];
const EVENTS = ['', 'message_start', 'message_delta', 'content_block_start', 'content_block_delta', 'error', 'message_stop'];

/** Each hostile payload, as a data-only line and under each event name. */
function anthropicLines(): string[] {
  const lines: string[] = [];
  for (const data of NON_OBJECTS) {
    for (const event of EVENTS) lines.push(`${event ? `event: ${event}\n` : ''}data: ${data}\n\n`);
  }
  // Objects whose members are not what their event promises.
  lines.push(
    'event: message_start\ndata: {"type":"message_start","message":null}\n\n',
    'event: message_start\ndata: {"type":"message_start","message":{"usage":null}}\n\n',
    'event: message_start\ndata: {"type":"message_start","message":{"usage":7}}\n\n',
    'event: message_delta\ndata: {"type":"message_delta","usage":"many","delta":null}\n\n',
    'event: message_delta\ndata: {"type":"message_delta","usage":null}\n\n',
    'event: content_block_start\ndata: {"type":"content_block_start","content_block":null}\n\n',
    'event: content_block_delta\ndata: {"type":"content_block_delta","delta":null}\n\n',
    'event: error\ndata: {"type":"error","error":null}\n\n',
  );
  return lines;
}

function chatLines(): string[] {
  const lines = NON_OBJECTS.map((d) => `data: ${d}\n\n`);
  lines.push(
    'data: {"choices":null,"usage":null}\n\n',
    'data: {"choices":[null]}\n\n',
    'data: {"choices":[{"delta":null}]}\n\n',
    'data: {"choices":[{"delta":"text"}]}\n\n',
    'data: {"choices":[{"delta":{"tool_calls":[null, 3, {"function":null}]}}]}\n\n',
    'data: {"choices":[{"delta":{"tool_calls":null}}],"usage":{"prompt_tokens":null}}\n\n',
    'data: {"error":null}\n\n',
    'data: [{"usage":{"prompt_tokens":1,"completion_tokens":1}}]\n\n',
    'data: {"usage":{"prompt_tokens":1,"completion_tokens":1},"choices":[null,{"delta":null}]}\n\n',
  );
  return lines;
}

const sink = { pushDelta: () => {}, pushText: () => {} };

describe('stream meters skip a payload that is not the object they expect', () => {
  it.each(anthropicLines())('SseUsageParser: %j', (line) => {
    const parser = new SseUsageParser(sink);
    expect(() => parser.push(Buffer.from(line))).not.toThrow();
    // message_stop's event ends the stream, whatever its data: nothing after it is read.
    if (parser.sawMessageStop) return void expect(parser.endedAt).toBe(Buffer.byteLength(line));
    // Otherwise the stream reads on as usual after it.
    parser.push(Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'));
    expect(parser.inputTokens).toBe(5);
  });

  it.each(chatLines())('ChatStreamMeter: %j', (line) => {
    const meter = new ChatStreamMeter(sink);
    expect(() => meter.push(Buffer.from(line))).not.toThrow();
    meter.push(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'));
    expect(meter).toMatchObject({ inputTokens: 9, outputTokens: 2, sawMessageDelta: true });
  });
});

describe('stream rewriters skip a payload that is not the object they expect', () => {
  it.each(anthropicLines())('AnthropicToChatStream: %j', (line) => {
    for (const includeUsage of [true, false]) {
      const rewriter = new AnthropicToChatStream('m', includeUsage);
      expect(() => rewriter.push(Buffer.from(line))).not.toThrow();
    }
  });

  it('AnthropicToChatStream writes nothing for a non-object line', () => {
    const rewriter = new AnthropicToChatStream('m', true);
    for (const data of NON_OBJECTS.slice(0, 5)) expect(rewriter.push(Buffer.from(`event: message_start\ndata: ${data}\n\n`))).toBe('');
  });

  it.each(chatLines())('ChatToAnthropicStream and ChatUsageFilter: %j', (line) => {
    expect(() => new ChatToAnthropicStream('m').push(Buffer.from(line))).not.toThrow();
    expect(() => new ChatUsageFilter().push(Buffer.from(line))).not.toThrow();
  });

  it('ChatToAnthropicStream starts no message for a non-object line', () => {
    const rewriter = new ChatToAnthropicStream('m');
    for (const data of NON_OBJECTS.slice(0, 5)) expect(rewriter.push(Buffer.from(`data: ${data}\n\n`))).toBe('');
  });
});

const MESSAGE_BODIES = ['null', '1', '"x"', '[]', '[{"usage":{"input_tokens":1,"output_tokens":1}}]', '{"content":null}', '{"content":[null,1,"x"]}', '{"usage":null}', '{"usage":"x"}', '{"content":[{"type":"tool_use","input":null}],"usage":{"input_tokens":1,"output_tokens":1}}'];
const CHAT_BODIES = ['null', '1', '"x"', '[]', '{"choices":null}', '{"choices":[null]}', '{"choices":[{"message":null}]}', '{"choices":[{"message":"x"}]}', '{"usage":null}', '{"choices":[{"message":{"tool_calls":[null,1,{"function":null}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}', '{"choices":[{"message":{"content":[null,1]}}]}'];

describe('JSON answers that are not the object their protocol promises', () => {
  it.each(MESSAGE_BODIES)('an Anthropic body %s: usage, text and conversion read it as absent, nothing throws', (body) => {
    const buf = Buffer.from(body);
    expect(() => usageOfMessageBody(buf)).not.toThrow();
    expect(() => usageOfMessage(JSON.parse(body))).not.toThrow();
    expect(() => textOfMessageBody(buf)).not.toThrow();
    let chat: string | null = null;
    expect(() => { chat = messageToChat(buf, 'm'); }).not.toThrow();
    // What is converted is a Chat Completion; what is not a Message is not converted.
    if (chat !== null) expect(JSON.parse(chat)).toMatchObject({ object: 'chat.completion' });
  });

  it('an Anthropic body that is not an object is not converted', () => {
    for (const body of ['null', '1', '"x"', '[]']) expect(messageToChat(Buffer.from(body), 'm')).toBeNull();
  });

  it.each(CHAT_BODIES)('a Chat Completions body %s: usage, text and conversion read it as absent, nothing throws', (body) => {
    const buf = Buffer.from(body);
    expect(() => usageOfChatBody(buf)).not.toThrow();
    expect(() => textOfChatBody(buf)).not.toThrow();
    let message: string | null = null;
    expect(() => { message = chatToMessage(buf, 'm'); }).not.toThrow();
    if (message !== null) expect(JSON.parse(message)).toMatchObject({ type: 'message' });
  });

  it('a Chat Completions body that is not an object is not converted; a tool call that is not an object is left out', () => {
    for (const body of ['null', '1', '"x"', '[]']) expect(chatToMessage(Buffer.from(body), 'm')).toBeNull();
    const converted = JSON.parse(chatToMessage(Buffer.from(CHAT_BODIES[9]!), 'm')!) as { content: unknown[]; usage: unknown };
    expect(converted.content).toEqual([{ type: 'tool_use', id: undefined, name: undefined, input: {} }].map((b) => JSON.parse(JSON.stringify(b))));
    expect(converted.usage).toMatchObject({ input_tokens: 1, output_tokens: 1 });
  });
});
