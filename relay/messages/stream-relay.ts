// A provider's 200 event stream passed on to the client as it arrives, then settled. uWS lifecycle
// (the exchange's onAborted is set long before): every write is corked, as each runs in a callback of
// the provider's body; a full socket pauses that body until onWritable, and so does delivered-text
// counting when it lags. However the stream ends, it ends in the exchange's one finish().
//
// The provider's format decides how the usage is read (its StreamMeter: SseUsageParser for Anthropic,
// ChatStreamMeter for Chat Completions); when the client speaks the other protocol, a StreamRewriter
// turns each provider chunk into the client's events as it arrives (nothing is held back but a
// partial line). Same protocol on both sides: the provider's bytes are written as they are.
import type { HttpResponse } from 'uWebSockets.js';
import type { Dispatcher } from 'undici';
import type { Logger } from '../../infra/logger.js';
import { errorBody } from '../errors.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import type { Channel } from '../routing/channel-registry.js';
import type { StreamUsage } from '../stream/sse-usage-parser.js';
import type { Provider, StreamMeter } from '../providers/provider.js';
import { DeliveredTextCounter } from '../token-count/delivered-text-counter.js';
import type { TokenCounter } from '../token-count/token-counter.js';
import { providerErrorReason, REASON } from './failure-reasons.js';
import type { Outcome } from './settlement.js';
import { closesConnection } from '../connection-draining.js';

/** What an Anthropic client is told last of a provider stream that failed or was cut. */
export const STREAM_FAILED_EVENT = `event: error\ndata: ${errorBody('api_error', 'The model provider stream failed.')}\n\n`;

/** Turns a provider's stream into the client's protocol, chunk by chunk. */
export interface StreamRewriter {
  /** The client's bytes for this provider chunk ('' when nothing is complete yet). */
  push(chunk: Buffer): string | Buffer;
}

/** How one stream is read and written: the provider's meter, the conversion, the client's last words on failure. */
export interface StreamFormat {
  provider: Pick<Provider, 'streamMeter'>;
  /** null: the client speaks the provider's protocol, its bytes pass as they are. */
  rewriter: StreamRewriter | null;
  /** Written last when the provider's stream failed or was cut. */
  failedEvent: string;
  /** Name of the response header that carries the provider's request id. */
  requestIdHeader: string;
}

/** What a stream reads and marks of its exchange: messages-handler.ts's Exchange is one, passed as it is. */
export interface StreamingExchange {
  readonly ctx: { log: Logger; tokens: TokenCounter; deliveredFlushBytes: number };
  readonly res: HttpResponse;
  readonly requestId: string;
  readonly upstreamRequestId: string;
  readonly t0: number;
  readonly channel: Channel | null;
  readonly aborted: boolean;
  /** True until message_start: a client leaving before it does not cancel the provider (messages-handler.ts). */
  usagePending: boolean;
  responded: boolean;
  headersSent: boolean;
  done(status: number, errorType: string): void;
  finish(outcome: Outcome): void;
  /** The prompt's token count, for a cut stream whose provider states its input only at the end. */
  countPromptTokens(): Promise<number>;
}

export function pipeStream(ex: StreamingExchange, response: Dispatcher.ResponseData, format: StreamFormat): void {
  const body = response.body;
  const res = ex.res;
  // Two reasons to pause the provider: the client socket is full, or delivered-text counting lags.
  let socketFull = false;
  let countingLags = false;
  const delivered = new DeliveredTextCounter(ex.ctx.tokens, {
    flushBytes: ex.ctx.deliveredFlushBytes,
    onCongestion: (lagging) => {
      countingLags = lagging;
      if (lagging) body.pause();
      else if (!socketFull && !body.destroyed) body.resume();
    },
  });
  const parser = format.provider.streamMeter(delivered); // payloads handed over in place, no copy
  const rewriter = format.rewriter;
  const failedEvent = format.failedEvent;
  ex.headersSent = true;
  ex.usagePending = true;
  res.cork(() => {
    res.writeStatus('200 OK')
      .writeHeader('content-type', 'text/event-stream; charset=utf-8')
      .writeHeader('cache-control', 'no-cache')
      .writeHeader(format.requestIdHeader, ex.upstreamRequestId)
      .writeHeader('x-gateway-request-id', ex.requestId);
    // A stream cannot end with uWS's closeConnection (the socket closes before the last chunk): the
    // client is told to hang up instead (connection-draining.ts).
    if (closesConnection()) res.writeHeader('connection', 'close');
  });
  const onWritable = (): boolean => {
    socketFull = false;
    if (!countingLags) body.resume();
    return true;
  };
  let first = true;
  body.on('data', (chunk: Buffer) => {
    parser.push(chunk);
    if (ex.usagePending && parser.sawMessageStart) {
      ex.usagePending = false;
      // The client left before the provider said what it bills; now it has, so stop it.
      if (ex.aborted) return void body.destroy(new Error('client went away'));
    }
    if (ex.aborted) return;
    if (first) {
      first = false;
      relayMetrics.streamFirstByte(performance.now() - ex.t0);
    }
    const out = rewriter === null ? chunk : rewriter.push(chunk);
    if (out.length === 0) return;
    let ok = true;
    res.cork(() => {
      ok = res.write(out);
    });
    if (!ok) {
      socketFull = true;
      relayMetrics.streamPaused();
      body.pause();
      res.onWritable(onWritable);
    }
  });
  body.on('end', () => {
    // A provider stream that stops before message_stop (and says nothing) died mid-way.
    const cut = !parser.sawMessageStop && !parser.error;
    ex.done(200, cut || parser.error ? 'stream_error' : '');
    // The stream is ended once its settlement is on the spool's disk (settlement-spool.ts).
    void settleStream(ex, parser, delivered, parser.error
      ? providerErrorReason(parser.error.type)
      : parser.sawMessageStop ? null : REASON.streamCut, () => endStream(ex, cut ? failedEvent : undefined));
  });
  body.on('error', (err: Error) => {
    if (ex.aborted) return void settleStream(ex, parser, delivered, REASON.clientGoneMidStream);
    ex.done(200, 'stream_error');
    ex.ctx.log.warn({ channel: ex.channel?.id, requestId: ex.requestId, err: err.message }, 'provider stream failed');
    // The client already has a 200: it is told in the stream, as Anthropic does, once settled.
    void settleStream(ex, parser, delivered, REASON.streamFailed, () => endStream(ex, failedEvent));
  });
}

function endStream(ex: StreamingExchange, last: string | undefined): void {
  if (ex.aborted || ex.responded) return;
  ex.responded = true;
  ex.res.cork(() => ex.res.end(last));
}

/**
 * Settles a stream, then calls `settled` (which ends the client's stream): with the provider's final usage (message_delta) when it sent one, pending
 * delivered text dropped uncounted; otherwise with the exact token count of the text delivered.
 * `partialReason` null means the stream completed.
 */
async function settleStream(ex: StreamingExchange, parser: StreamMeter, delivered: DeliveredTextCounter, partialReason: string | null, settled?: () => void): Promise<void> {
  let usage: StreamUsage;
  if (parser.sawMessageDelta) {
    delivered.discard();
    usage = snapshot(parser);
  } else {
    let output: number;
    try {
      output = await delivered.total();
    } catch (err) {
      ex.ctx.log.warn({ err, requestId: ex.requestId }, 'delivered-text count failed; billing the delta count');
      output = snapshot(parser).outputTokens;
    }
    // A Chat Completions stream states its input only with its final usage: the prompt is counted here.
    let input = parser.inputTokens;
    if (parser.inputOnlyAtEnd && parser.sawMessageStart) {
      try {
        input = await ex.countPromptTokens();
      } catch (err) {
        ex.ctx.log.warn({ err, requestId: ex.requestId }, 'prompt count of a cut stream failed; its input is not billed');
      }
    }
    usage = { inputTokens: input, outputTokens: output, cacheCreationTokens: parser.cacheCreationTokens, cacheCreation1hTokens: parser.cacheCreation1hTokens, cacheReadTokens: parser.cacheReadTokens, webSearchRequests: parser.webSearchRequests };
  }
  if (partialReason === null) ex.finish({ kind: 'ok', usage });
  else ex.finish({ kind: 'partial', usage, reason: partialReason });
  settled?.();
}

function snapshot(p: StreamMeter): StreamUsage {
  // A cut stream has no final message_delta: each text delta passed on is one token of the mock and
  // a lower bound for real providers; the exact count of delivered text is the token counter's job.
  const output = p.sawMessageDelta ? p.outputTokens : Math.max(p.outputTokens, p.contentDeltas);
  return { inputTokens: p.inputTokens, outputTokens: output, cacheCreationTokens: p.cacheCreationTokens, cacheCreation1hTokens: p.cacheCreation1hTokens, cacheReadTokens: p.cacheReadTokens, webSearchRequests: p.webSearchRequests };
}
