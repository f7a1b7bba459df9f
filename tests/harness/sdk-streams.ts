// A stream read to its end with an official SDK, as a client application reads one: the text it got,
// and the error the SDK raised (null when none). For tests of what a client sees of a stream that
// fails part way.
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

/** `client.chat.completions.create` with `stream: true`, its first choice's content joined. */
export async function openaiStreamRead(client: OpenAI, params: Omit<OpenAI.ChatCompletionCreateParamsStreaming, 'stream'>): Promise<StreamRead> {
  let text = '';
  const error = await (async () => {
    const stream = await client.chat.completions.create({ ...params, stream: true });
    for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
  })().then(() => null, (e: unknown) => e);
  return { text, error };
}
