// The edge schema of POST /v1/chat/completions: what the relay needs to route, price and convert a
// request. Unknown fields pass through to an OpenAI-format provider untouched (the original bytes are
// forwarded when nothing has to change); conversion to Anthropic's Messages (providers/anthropic/
// from-chat.ts) reads the fields it knows and refuses, with a 400, what it cannot carry over.
import { z } from 'zod';

const part = z.object({ type: z.string({ error: 'content part: type must be a string' }) }).loose();
const content = z.union([z.string(), z.array(part), z.null()]);

const message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function'], {
      error: "role: must be one of 'system', 'developer', 'user', 'assistant', 'tool'",
    }),
    content: content.optional(),
  })
  .loose();

export const chatRequestSchema = z
  .object({
    model: z.string({ error: 'model: required string' }).min(1, 'model: must not be empty'),
    messages: z.array(message, { error: 'messages: required array' }).min(1, 'messages: at least one message is required'),
    max_tokens: z.number().int('max_tokens: must be an integer').positive('max_tokens: must be positive').nullish(),
    max_completion_tokens: z.number().int('max_completion_tokens: must be an integer').positive('max_completion_tokens: must be positive').nullish(),
    stream: z.boolean({ error: 'stream: must be a boolean' }).nullish(),
    stream_options: z.object({ include_usage: z.boolean().nullish() }).loose().nullish(),
    n: z.number().int('n: must be an integer').positive('n: must be positive').max(128, 'n: at most 128').nullish(),
    temperature: z.number({ error: 'temperature: must be a number' }).min(0).max(2).nullish(),
    top_p: z.number({ error: 'top_p: must be a number' }).min(0).max(1).nullish(),
    stop: z.union([z.string(), z.array(z.string()).max(4, 'stop: at most 4 sequences')]).nullish(),
    tools: z.array(z.object({ type: z.string() }).loose(), { error: 'tools: must be an array' }).nullish(),
    tool_choice: z.union([z.string(), z.object({ type: z.string() }).loose()]).nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    user: z.string().nullish(),
  })
  .loose();

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type ChatMessage = ChatRequest['messages'][number];
