// The edge schema of POST /v1/chat/completions: what the relay needs to route, price and convert a
// request. Unknown fields pass through to an OpenAI-format provider untouched (the original bytes are
// forwarded when nothing has to change); conversion to Anthropic's Messages (providers/anthropic/
// from-chat.ts) reads the fields it knows and refuses, with a 400, what it cannot carry over.
import { z } from 'zod';
import { compileEdgeSchema } from '../edge-schema.js';

const part = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(part), z.null()]);

const message = z
  .object({
    role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
    content: content.optional(),
  })
  .loose();

export const chatRequestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(message).min(1),
    max_tokens: z.number().int().positive().nullish(),
    max_completion_tokens: z.number().int().positive().nullish(),
    stream: z.boolean().nullish(),
    stream_options: z.object({ include_usage: z.boolean().nullish() }).loose().nullish(),
    n: z.number().int().positive().max(128).nullish(),
    temperature: z.number().min(0).max(2).nullish(),
    top_p: z.number().min(0).max(1).nullish(),
    stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
    tools: z.array(z.object({ type: z.string() }).loose()).nullish(),
    tool_choice: z.union([z.string(), z.object({ type: z.string() }).loose()]).nullish(),
    parallel_tool_calls: z.boolean().nullish(),
    user: z.string().nullish(),
  })
  .loose();

export type ChatRequest = z.infer<typeof chatRequestSchema>;
export type ChatMessage = ChatRequest['messages'][number];

/** The body when it is a valid Chat Completions request (the same object), else its first problem. */
export const checkChatRequest = compileEdgeSchema(chatRequestSchema);
