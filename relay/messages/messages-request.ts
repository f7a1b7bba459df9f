// The edge schema of POST /v1/messages: what the relay needs to route and price a request. Unknown
// fields pass through to the provider untouched (the original bytes are forwarded).
import { z } from 'zod';

const textBlock = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(textBlock)]);

export const messagesRequestSchema = z
  .object({
    model: z.string({ error: 'model: required string' }).min(1, 'model: must not be empty'),
    messages: z
      .array(z.object({ role: z.enum(['user', 'assistant']), content }).loose(), { error: 'messages: required array' })
      .min(1, 'messages: at least one message is required'),
    max_tokens: z.number({ error: 'max_tokens: required integer' }).int('max_tokens: must be an integer').positive('max_tokens: must be positive'),
    stream: z.boolean({ error: 'stream: must be a boolean' }).optional(),
    system: z.union([z.string(), z.array(textBlock)]).optional(),
  })
  .loose();

export type MessagesRequest = z.infer<typeof messagesRequestSchema>;

/** The first problem, named by its field, as Anthropic words its own validation errors. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid request';
  const path = issue.path.join('.');
  return issue.message.startsWith(path + ':') || !path ? issue.message : `${path}: ${issue.message}`;
}
