// What the relay needs to know of a provider's wire format, as data: one small module per format
// (providers/anthropic/, providers/openai/), one static registry (registry.ts), as Portkey keeps
// src/providers/*. The exchange's lifecycle (messages-handler.ts) is the same for every provider: it
// asks the channel's provider where to send, how to authenticate, how to read the usage of an answer,
// and (when the client spoke the other protocol) how to convert the request and the answer.
import type { Channel } from '../routing/channel-registry.js';
import type { ContentDeltaSink, StatedUsage, StreamUsage } from '../stream/sse-usage-parser.js';

/** Where a meter hands the delivered text (DeliveredTextCounter): Anthropic delta payloads, or text found already. */
export interface DeliveredTextSink extends ContentDeltaSink {
  /** buf[start, end): the raw bytes between a JSON string's quotes, valid only during the call. */
  pushText(buf: Buffer, start: number, end: number): void;
}

/** The two API formats: Anthropic Messages (`/v1/messages`) and OpenAI Chat Completions (`/v1/chat/completions`). */
export type Protocol = 'anthropic' | 'openai';

/**
 * Reads the usage of a provider's event stream as it passes, chunk by chunk. SseUsageParser is the
 * Anthropic one; openai/chat-usage.ts's ChatStreamMeter the Chat Completions one.
 */
export interface StreamMeter extends StreamUsage {
  push(chunk: Buffer): void;
  /** The provider said what the request's input costs (or, when it never does before the end, that it started). */
  readonly sawMessageStart: boolean;
  /** The provider stated its output as a count (the final usage, unless content follows it). */
  readonly sawMessageDelta: boolean;
  /** The stream completed (message_stop, `data: [DONE]`). */
  readonly sawMessageStop: boolean;
  /**
   * The stream said all it had to say: sawMessageStop, or, for Chat Completions, the generation
   * finished and its usage stated after it (OpenAI-compatible servers that close without `[DONE]`).
   * A stream that ends otherwise was cut.
   */
  readonly complete: boolean;
  /**
   * What `complete` would be were the provider's body to end cleanly here (no reset, no timeout):
   * for Chat Completions, also once the generation finished, with no usage stated and no `[DONE]` (a
   * server that ignores include_usage and closes without `[DONE]` sent a whole answer: its client got
   * a failed-stream event after it). Unset: `complete`.
   */
  readonly wholeAtCleanEnd?: boolean;
  /**
   * The event that ends the stream (message_stop's, `[DONE]`'s) ended at this index of the chunk last
   * pushed (just past its blank line); 0 for chunks pushed after it; -1 before. Nothing after it is
   * read: the stream relay passes and bills the stream up to here.
   */
  readonly endedAt: number;
  /** The stream stated its input as a count of a prompt; false: the relay counts the prompt (stream-relay.ts). */
  readonly inputStated: boolean;
  /** The generation is over (message_delta, a finish_reason): what may still come is the final usage. */
  readonly generationDone: boolean;
  /** Text deltas passed through: each one token of the mocks, a lower bound for real providers. */
  readonly contentDeltas: number;
  /** Content came after the output last stated: that usage does not cover what was delivered. */
  readonly contentAfterUsage: boolean;
  /** Events other than keep-alives (pings, comments): what the stall check counts as progress. */
  readonly events: number;
  readonly error: { type: string; message: string } | null;
}

export interface ProviderRequestHeaders {
  /** The client's anthropic-version and anthropic-beta (Anthropic providers only). */
  version: string;
  beta: string;
}

export interface Provider {
  readonly protocol: Protocol;
  /** Path appended to the channel's base URL. */
  readonly path: string;
  /** Lower-case name of the header that carries the provider's request id. */
  readonly requestIdHeader: string;
  /** Headers of a request to this provider, its credential included. */
  headers(channel: Channel, client: ProviderRequestHeaders): Record<string, string>;
  /** Usage of a non-streaming answer's body, its unstated sides marked; null when it states none. */
  usageOfBody(body: Buffer): StatedUsage | null;
  /**
   * The text a non-streaming answer delivers (its text, reasoning and tool-call arguments), for a
   * provider that stated no usage: counted by the relay, as a stream's delivered text is; null when
   * the body is not an answer.
   */
  textOfBody(body: Buffer): string | null;
  /** A fresh meter for one streamed answer; delivered text goes to `delivered` (for cut streams). */
  streamMeter(delivered: DeliveredTextSink): StreamMeter;
}
