// Requests made with an official SDK as a client application makes them: a stream read to its end
// (the text it got, and the error the SDK raised, null when none: what a client sees of a stream that
// fails part way), and a Messages request, streamed or not, with the gateway's request id.
import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';

export interface StreamRead {
  text: string;
  error: unknown;
}

/** `client.messages.create` with `stream: true`, its text deltas joined. */
export async function anthropicStreamRead(client: Anthropic, params: Omit<Anthropic.MessageCreateParamsStreaming, 'stream'>): Promise<StreamRead> {
  let text = '';
  const error = await (async () => {
    const stream = await client.messages.create({ ...params, stream: true });
    for await (const e of stream) if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  })().then(() => null, (e: unknown) => e);
  return { text, error };
}

/** The text deltas of a Messages stream already opened (with `.withResponse()`, say), joined. */
export async function streamedText(stream: AsyncIterable<Anthropic.MessageStreamEvent>): Promise<string> {
  let text = '';
  for await (const e of stream) if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
  return text;
}

/** `client.chat.completions.create` with `stream: true`, its first choice's content joined. */
export async function openaiStreamRead(client: OpenAI, params: Omit<OpenAI.ChatCompletionCreateParamsStreaming, 'stream'>): Promise<StreamRead> {
  let text = '';
  const error = await (async () => {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
  })().then(() => null, (e: unknown) => e);
  return { text, error };
}

/**
 * One Messages request with the SDK, streamed (read to its final message) or not: the message the
 * client got and the gateway's request id (x-gateway-request-id), for a test to find its ledger row.
 */
export async function anthropicMessage(client: Anthropic, params: Anthropic.MessageCreateParamsNonStreaming, stream: boolean): Promise<{ message: Anthropic.Message; requestId: string }> {
  if (stream) {
    const s = client.messages.stream(params);
    const message = await s.finalMessage();
    const { response } = await s.withResponse();
    return { message, requestId: response.headers.get('x-gateway-request-id')! };
  }
  const { data, response } = await client.messages.create(params).withResponse();
  return { message: data, requestId: response.headers.get('x-gateway-request-id')! };
}
