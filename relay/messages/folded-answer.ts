// A provider's stream folded into the JSON answer its client asked for (stream-as-answer.ts), with
// what the stream's own meter says of its usage. The client receives everything the stream carried,
// so the answer is billed as the same stream streamed to the end would be (stream-relay.ts
// settleStream), not by whatever usage the fold happens to hold: a stream that ended before its
// message_delta holds message_start's placeholder output_tokens 1, and one that stated a usage before
// content that followed it (some servers state it first, or with every chunk) holds that early
// figure. Both were billed 1 output token for an answer of 50.
import type { DeliveredTextSink, Protocol, Provider } from '../providers/provider.js';
import { chunksAsCompletion, eventsAsMessage } from '../stream/stream-as-answer.js';
import { outputStatedInFull } from './stream-relay.js';

export interface FoldedAnswer {
  /** The answer as the provider's JSON would have been. */
  body: Buffer;
  /**
   * false: the answer could not be written as JSON (a value nested deeper than JSON.stringify can
   * go: JSON.parse takes any depth, stringify overflows the stack at a few thousand levels). `body`
   * then holds its usage without its content, to bill what the provider generated; the client is
   * told the answer could not be read.
   */
  readable: boolean;
  /** The error the stream ended with, as the provider wrote it, or null. */
  error: Record<string, unknown> | null;
  /**
   * The output the stream stated is what it generated, as a stream's meter tells it
   * (stream-relay.ts outputStatedInFull). Otherwise the answer's text is counted and the
   * larger of the two billed, as for a stream that delivered more than its usage says.
   */
  outputFinal: boolean;
  /**
   * The stream stated an output after its start (Anthropic's message_delta, a chunk's usage): then a
   * floor of what it generated. Otherwise the output the answer holds is message_start's placeholder
   * (output_tokens 1), which the stream's own settlement does not bill either.
   */
  outputStated: boolean;
}

/** The meter's text goes nowhere: the folded answer's text is counted whole when it is needed. */
const IGNORED_TEXT: DeliveredTextSink = { pushDelta() {}, pushText() {} };

/** The stream in `buf` folded for a client that asked for JSON; null when the bytes hold no such stream. */
export function foldStreamAnswer(buf: Buffer, provider: Provider): FoldedAnswer | null {
  const folded = provider.protocol === 'anthropic' ? eventsAsMessage(buf) : chunksAsCompletion(buf);
  if (folded === null) return null;
  const { outputFinal, outputStated } = statedOutput(buf, provider);
  const whole = stringified(folded.answer);
  if (whole !== null) return { body: Buffer.from(whole), readable: true, error: folded.error, outputFinal, outputStated };
  const bare = stringified(withoutContent(folded.answer, provider.protocol)) ?? '{}';
  return { body: Buffer.from(bare), readable: false, error: folded.error, outputFinal, outputStated };
}

function statedOutput(buf: Buffer, provider: Provider): { outputFinal: boolean; outputStated: boolean } {
  const meter = provider.streamMeter(IGNORED_TEXT);
  try {
    meter.push(buf);
  } catch {
    return { outputFinal: false, outputStated: meter.sawMessageDelta };
  }
  return { outputFinal: outputStatedInFull(meter), outputStated: meter.sawMessageDelta };
}

function stringified(value: unknown): string | null {
  try {
    return JSON.stringify(value);
  } catch {
    return null;
  }
}

function withoutContent(answer: Record<string, unknown>, protocol: Protocol): Record<string, unknown> {
  return protocol === 'anthropic' ? { ...answer, content: [] } : { ...answer, choices: [] };
}
