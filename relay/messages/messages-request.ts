// The edge schema of POST /v1/messages: what the relay needs to route and price a request. Unknown
// fields pass through to the provider untouched (the original bytes are forwarded). Checked compiled
// (../edge-schema.ts), which also words the problems.
import { z } from 'zod';
import { compileEdgeSchema } from '../edge-schema.js';

const textBlock = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(textBlock)]);

export const messagesRequestSchema = z
  .object({
    model: z.string().min(1),
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content }).loose()).min(1),
    max_tokens: z.number().int().positive(),
    stream: z.boolean().optional(),
    system: z.union([z.string(), z.array(textBlock)]).optional(),
  })
  .loose();

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;

/** The body when it is a valid Messages request (the same object), else its first problem. */
export const checkMessagesRequest = compileEdgeSchema(messagesRequestSchema);
