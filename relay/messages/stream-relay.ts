// A provider's 200 event stream passed on to the client as it arrives, then settled. uWS lifecycle
// (the exchange's onAborted is set long before): every write is corked, as each runs in a callback of
// the provider's body, and what arrives in one tick goes out in one cork (ClientStream); a full socket
// pauses that body until onWritable, and so does delivered-text counting when it lags. However the
// stream ends, it ends in the exchange's one finish().
//
// The provider's format decides how the usage is read (its StreamMeter: SseUsageParser for Anthropic,
// ChatStreamMeter for Chat Completions); when the client speaks the other protocol, a StreamRewriter
// turns each provider chunk into the client's events as it arrives (nothing is held back but a
// partial line). Same protocol on both sides: the provider's bytes are written as they are, whole
// events at a time (EventAligner: an event cut by the provider is not half sent). Either way the
// provider's error events are scrubbed of the channel's key and of key shapes on their way out
// (ErrorEventScrubber); every other chunk is written as it is, after one indexOf.
import type { HttpResponse } from 'uWebSockets.js';
import type { Readable } from 'node:stream';
import type { Logger } from '../../infra/logger.js';
import type { LogThrottle } from '../../infra/log-throttle.js';
import { logRepeated } from './repeated-log.js';
import { errorBody } from '../errors.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import type { Channel } from '../routing/channel-registry.js';
import type { StreamUsage } from '../stream/sse-usage-parser.js';
import type { Protocol, Provider, StreamMeter } from '../providers/provider.js';
import { DeliveredTextCounter } from '../token-count/delivered-text-counter.js';
import { EventAligner } from '../stream/event-aligner.js';
import { ErrorEventScrubber } from '../stream/error-event-scrub.js';
import type { TokenCounter } from '../token-count/token-counter.js';
import type { Encoding } from '../token-count/bpe-count.js';
import { providerErrorReason, REASON } from './failure-reasons.js';
import { usageAsBilled, type Outcome, type UsageBound } from './settlement.js';
import { closesConnection } from '../connection-draining.js';
import { lingeringBodies } from '../upstream/body-linger.js';
import type { ChannelCooldown } from '../routing/channel-cooldown.js';
import { writeCorsHeaders } from '../cors.js';
import { outputLimitField } from '../../core/channels/output-limit.js';

/**
 * How long a stream is read on, once its client has left, for what the provider bills and has not
 * said yet: its message_start (the input), or the usage owed after the generation (finish_reason,
 * message_delta). The provider sends either at once (message_start right after the headers, OpenAI's
 * include_usage chunk right after the finish_reason), so a few seconds only bound a provider that
 * never does, rather than holding its connection and the reservation for as long as it sends pings
 * (each of which restarts the body timeout).
 */
export const USAGE_TAIL_WAIT_MS = 5_000;

/** What an Anthropic client is told last of a provider stream that failed or was cut. */
export const STREAM_FAILED_EVENT = `event: error\ndata: ${errorBody('api_error', 'The model provider stream failed.')}\n\n`;
/** What the words of a stream this relay cut as it shut down say (relay_closing's, once the answer had begun). */
export const RELAY_CLOSING_STREAM_MESSAGE = 'The relay is shutting down and cut this stream; what was delivered is billed. Retry the request.';
/** What an Anthropic client is told last of a stream this relay cut as it shut down. */
export const RELAY_CLOSING_EVENT = `event: error\ndata: ${errorBody('overloaded_error', RELAY_CLOSING_STREAM_MESSAGE)}\n\n`;

/** Turns a provider's stream into the client's protocol, chunk by chunk. */
const CHAT_DONE = Buffer.from('\n\ndata: [DONE]\n\n');
/** Ends an event a provider left open. */
const EVENT_END = Buffer.from('\n\n');
/** What is passed on of a chunk that holds nothing for the client. */
const NOTHING = Buffer.alloc(0);

export interface StreamRewriter {
  /** The client's bytes for this provider chunk ('' when nothing is complete yet). */
  push(chunk: Buffer): string | Buffer;
  /**
   * Set when the provider's stream can no longer be converted (an event's data past what is held:
   * line-stream.ts): what push() returned is written, then the stream ends as failed.
   */
  readonly failure?: Error | null;
  /**
   * A converting rewriter (to-chat.ts, to-messages.ts) holds the events that tell the stream's usage
   * (and those after them) when this is set, which pipeStream does before the first chunk: the
   * provider's figures may be no counts ("50", 1e400), and the client is told the usage it is billed,
   * known once the stream is settled (heldEndEvents). Unset, they go as they come with the provider's.
   */
  holdsFinalUsage?: boolean;
  /** The events held (holdsFinalUsage), with `billed` (the ledger's figures; null: the provider's); '' when none are held. */
  heldEndEvents?(billed: StreamUsage | null): string;
}

/** How one stream is read and written: the provider's meter, the conversion, the client's last words on failure. */
export interface StreamFormat {
  provider: Pick<Provider, 'streamMeter'>;
  /** null: the client speaks the provider's protocol, its bytes pass as they are. */
  rewriter: StreamRewriter | null;
  /** Written last when the provider's stream failed or was cut. */
  failedEvent: string;
  /**
   * Written last instead when this relay cut the stream, shutting down with its grace over
   * (`relayClosing.cut`, the upstream pools destroyed): the provider was not at fault.
   */
  closingEvent?: string;
  relayClosing?: { readonly cut: boolean };
  /** Name of the response header that carries the provider's request id. */
  requestIdHeader: string;
  /** The client's protocol, in which a provider's account refusal is told (error-event-scrub.ts); unset: the error's own. */
  clientProtocol?: Protocol;
  /** USAGE_TAIL_WAIT_MS unless given (tests). */
  tailWaitMs?: number;
  /**
   * The longest a stream billed by its final usage is read on through its generation once its client
   * has left (the relay: UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS, a whole generation's longest); a
   * provider sending empty chunks would otherwise hold it for as long as it sends them.
   */
  readOnMs?: number;
}

/** What a stream reads and marks of its exchange: messages-handler.ts's Exchange is one, passed as it is. */
export interface StreamingExchange {
  readonly ctx: { log: Logger; repeatedLog?: LogThrottle; tokens: TokenCounter; deliveredFlushBytes: number; channels?: { readonly cooldown: ChannelCooldown } };
  readonly res: HttpResponse;
  readonly requestId: string;
  readonly upstreamRequestId: string;
  readonly t0: number;
  readonly channel: Channel | null;
  /** The encoding the delivered text is counted in (encoding-of.ts). */
  readonly tokenEncoding: Encoding;
  readonly aborted: boolean;
  /**
   * True until message_start, and again from the end of the generation until the final usage: a
   * client leaving then does not cancel the provider (messages-handler.ts), which is read on until it
   * has said what it bills.
   */
  usagePending: boolean;
  /**
   * What the provider bills for this stream only its final usage says (billedByFinalUsage): pending
   * the whole stream long, so a client leaving does not cut it.
   */
  readonly billedByFinalUsage: boolean;
  /** Set by pipeStream; the exchange calls it when its client leaves while usagePending. */
  onAbortedWhilePending?: () => void;
  responded: boolean;
  headersSent: boolean;
  /** When the provider's stream last made progress (an event other than a keep-alive), for the heartbeat's stall check. */
  streamLineAt: number;
  done(status: number, errorType: string): void;
  finish(outcome: Outcome): void;
  /** Runs `then` (the answer's end) once the settlement finish() made is on the spool's disk. */
  afterSettled(then: () => void): void;
  /** The prompt's token count, for a cut stream whose provider states its input only at the end. */
  countPromptTokens(): Promise<number>;
  /** The most the request can use (settlement.ts): the usage billed is within it, and a converted stream tells that usage. */
  readonly usageBound?: UsageBound | undefined;
}

/** readOnMs's default: UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS's. */
const READ_ON_MAX_MS = 600_000;

/** `body`: the provider's body as undici's request() gives it (or a Readable of an answer read whole). */
export function pipeStream(ex: StreamingExchange, body: Readable, format: StreamFormat): void {
  // Two reasons to pause the provider: the client socket is full, or delivered-text counting lags.
  let socketFull = false;
  let countingLags = false;
  const delivered = new DeliveredTextCounter(ex.ctx.tokens, {
    flushBytes: ex.ctx.deliveredFlushBytes,
    encoding: ex.tokenEncoding,
    onCongestion: (lagging) => {
      countingLags = lagging;
      // Once finished, the body is drained for its response's end (complete()), not paused.
      if (lagging && !finished) body.pause();
      else if (!socketFull && !body.destroyed) body.resume();
    },
  });
  const parser = format.provider.streamMeter(delivered); // payloads handed over in place, no copy
  const rewriter = format.rewriter;
  // A converted stream's usage is written once settled, with the figures billed (StreamRewriter).
  if (rewriter !== null && rewriter.heldEndEvents !== undefined) rewriter.holdsFinalUsage = true;
  // The provider's bytes pass whole events at a time, so that a cut's error event is never read as
  // the end of half an event (event-aligner.ts); a rewriter writes whole events of its own.
  const aligner = rewriter === null ? new EventAligner() : null;
  const failedEvent = format.failedEvent;
  ex.headersSent = true;
  ex.usagePending = true;
  const onWritable = (): boolean => {
    socketFull = false;
    if (!countingLags) body.resume();
    return true;
  };
  const client = new ClientStream(ex, format.requestIdHeader, () => {
    socketFull = true;
    relayMetrics.streamPaused();
    body.pause();
    ex.res.onWritable(onWritable);
  });
  // What goes to the client from the provider (not the relay's own failed event) passes here.
  const scrubber = new ErrorEventScrubber(ex.channel?.apiKey, (out) => client.write(out), format.clientProtocol);
  let first = true;
  /** A chunk threw in the meter or the rewriter: the stream is being ended as failed. */
  let broken = false;
  ex.streamLineAt = performance.now();
  const onChunk = (chunk: Buffer): void => {
    const events = parser.events;
    parser.push(chunk);
    // Progress for the heartbeat's stall check (reservation-heartbeat.ts): an event, not a byte nor a
    // line. A keep-alive (`event: ping`, a comment) is none: a provider pinging every few hundred
    // milliseconds and sending nothing else held the stream, its reservation and a pooled connection
    // for ever, since each ping also restarts undici's body timeout.
    if (parser.events !== events) ex.streamLineAt = performance.now();
    // The provider bills what it says before message_start (the input) and after the generation (the
    // final usage: OpenAI's comes in a chunk of its own after the finish_reason, its reasoning and
    // cached tokens nowhere else). A client that leaves in either gap does not cancel it; a client that
    // breaks out of its loop at the finish_reason would otherwise be billed its visible text alone.
    const pending = !parser.sawMessageStart || ((parser.generationDone || ex.billedByFinalUsage) && !finalUsage(parser) && !parser.sawMessageStop);
    if (pending !== ex.usagePending) {
      ex.usagePending = pending;
      // The client left before the provider said what it bills; now it has, so stop it.
      if (!pending && ex.aborted) return void body.destroy(new Error('client went away'));
    }
    // Its client gone, the stream is cut by the deadline of what it is read on for: its generation,
    // or the provider's final usage after it.
    if (ex.aborted) return armCut();
    if (first) {
      first = false;
      relayMetrics.streamFirstByte(performance.now() - ex.t0);
    }
    // The stream ends with the event of its message_stop or [DONE] (parser.endedAt): what a provider
    // writes after it is no part of the answer, neither passed on nor billed (it was both: content
    // and a second usage after [DONE] were billed), and a provider that keeps its connection open
    // after it no longer holds the client's end.
    const endedAt = parser.endedAt;
    // An end of a stream that never began (message_stop or [DONE] alone) is no answer: it is not
    // passed on, and the stream ends as failed (the meters' `complete`). One that began was metered
    // and is billed (settleStream), so it is passed on, end and all.
    const part = endedAt < 0 ? chunk : streamBegan(parser) ? chunk.subarray(0, endedAt) : NOTHING;
    const out = rewriter === null ? aligner!.push(part) : rewriter.push(part);
    if (out.length > 0) scrubber.push(out);
    // What was converted is written; the stream then ends as failed (the catch below).
    const failure = rewriter?.failure;
    if (failure) throw failure;
    // A converted stream holds its last events for the usage billed (StreamRewriter.holdsFinalUsage):
    // it is settled and ended once the provider's stream is complete, which an OpenAI-format stream
    // is at its usage chunk, its [DONE] possibly in a later read. An Anthropic-format stream only at
    // message_stop's end (endedAt): complete at its event line, it was ended with message_stop's data
    // in the next read unseen by the conversion, which then held no usage chunk and no [DONE].
    if (endedAt >= 0 || (rewriter?.holdsFinalUsage === true && completeUnended())) complete();
    else if (rewriter === null && completeUnended()) awaitDone();
  };
  /** Complete by its content and usage (an OpenAI-format stream's finish_reason and usage chunk), its end not yet read. */
  const completeUnended = (): boolean => parser.complete && !parser.sawMessageStop && !parser.error;
  // A Chat Completions stream passed in its own format is complete at its finish_reason and usage; its
  // [DONE] follows at once from every provider known, but one that then only pings held the client's
  // end until it closed or the stall check cut it (300 s). Such a stream ends once no event has come
  // for the tail's wait (the client gets the [DONE], endStream): one still making progress (n > 1 with
  // a usage in every chunk: a choice still generating) is not cut.
  let doneWait: NodeJS.Timeout | null = null;
  const awaitDone = (): void => {
    if (doneWait !== null) return;
    const seen = parser.events;
    doneWait = setTimeout(() => {
      doneWait = null;
      if (finished || broken || body.destroyed || !completeUnended()) return;
      if (parser.events === seen) complete();
      else awaitDone();
    }, format.tailWaitMs ?? USAGE_TAIL_WAIT_MS);
  };
  body.on('data', (chunk: Buffer) => {
    if (broken || finished) return;
    try {
      onChunk(chunk);
    } catch (err) {
      // Thrown out of undici's body, it would take the process and every user's stream down. Only this
      // exchange ends: the provider is cancelled and 'error' settles what was delivered and tells the
      // client, in its protocol, that the stream failed.
      broken = true;
      ex.ctx.log.error({ err, channel: ex.channel?.id, requestId: ex.requestId }, 'provider stream chunk could not be read; stream ended as failed');
      body.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  });
  // Once its client has left, a stream is read on for what the provider bills, but only so long:
  // nobody reads the answer, and a provider that only pings would otherwise hold the exchange and its
  // reservation for as long as it pings (the stall check counts no ping, but waits the whole body
  // timeout). Before message_start and after the generation, for USAGE_TAIL_WAIT_MS; a stream whose
  // bill only its final usage says, through its generation too, for at most readOnMs (the heartbeat's
  // stall check cuts one that stops making progress before). Cut, the stream settles for what was
  // stated and delivered.
  let cut: NodeJS.Timeout | null = null;
  let cutFor: 'tail' | 'generation' | null = null;
  const armCut = (): void => {
    if (!ex.usagePending || body.destroyed) return;
    const phase = ex.billedByFinalUsage && parser.sawMessageStart && !parser.generationDone ? 'generation' : 'tail';
    if (phase === cutFor) return;
    if (cut !== null) clearTimeout(cut);
    cutFor = phase;
    cut = setTimeout(() => {
      if (!body.destroyed) body.destroy(new Error('client went away; what the provider bills did not come'));
    }, phase === 'tail' ? format.tailWaitMs ?? USAGE_TAIL_WAIT_MS : format.readOnMs ?? READ_ON_MAX_MS);
  };
  body.once('close', () => {
    if (cut !== null) clearTimeout(cut);
    if (doneWait !== null) clearTimeout(doneWait);
    if (finished) lingeringBodies.release(body);
  });
  ex.onAbortedWhilePending = () => {
    // The socket a full client left will never drain: only the counting of delivered text may hold
    // the provider now (a paused body that nothing resumed was held until the stall check and billed
    // its delivered text, without the final usage it was read on for).
    socketFull = false;
    if (countingLags) body.pause();
    armCut();
  };
  // What the stream came to for the channel's cooldown (channel-cooldown.ts): a 200 whose stream is an
  // overload or server error before any content is a failure to serve, as a 529 or 500 is (Anthropic
  // reports an overload inside a stream so); a complete stream a success. Counted here, not at the
  // 200's headers (providerAnswered leaves streams to this).
  const noteOutcome = (whole: boolean): void => {
    const cooldown = ex.ctx.channels?.cooldown;
    const channelId = ex.channel?.id;
    if (cooldown === undefined || channelId === undefined) return;
    const type = parser.error?.type;
    if (type !== undefined) {
      if (parser.contentDeltas === 0 && (type === 'overloaded_error' || type === 'api_error' || type === 'server_error')) cooldown.failed(channelId);
    } else if (whole) cooldown.succeeded(channelId);
    // A stream that ended without beginning answered nothing.
    else if (!streamBegan(parser)) cooldown.failed(channelId);
  };
  /** The stream was settled and ended before the provider's body ended (complete(), below). */
  let finished = false;
  // The provider's stream ended (its body's end, or complete() for a converted one): the client's last
  // events, the settlement, then the client's end.
  const endStream = (cleanEnd = false): void => {
    // A Chat Completions stream whose generation finished and whose body then ended cleanly is whole
    // without its usage or [DONE] (wholeAtCleanEnd).
    const whole = parser.complete || (cleanEnd && parser.wholeAtCleanEnd === true);
    noteOutcome(whole);
    // A provider stream that stops before message_stop (and says nothing) died mid-way.
    const cut = !whole && !parser.error;
    ex.done(200, cut || parser.error ? 'stream_error' : '');
    if (aligner !== null && !ex.aborted) {
      const held = cut ? aligner.salvage() : aligner.rest();
      if (held.length > 0) {
        scrubber.push(held);
        // message_stop's event left unended by a provider that closed: ended here, or the SSE reader
        // drops it (the spec's rule for an event the stream's end cuts) and the SDK sees no message_stop.
        // A blank line too many is no event. (A Chat Completions stream's [DONE] below begins with its own.)
        if (parser.sawMessageStop && parser.endedAt < 0) scrubber.push(EVENT_END);
      }
    }
    // A Chat Completions stream complete without its `[DONE]`: the client gets the `[DONE]` its reader
    // may wait for (message_stop, for an Anthropic client, from the rewriter). The blank line first
    // ends an event the provider left open. So does a converted stream ended by complete(): an
    // OpenAI-format stream is complete at its finish_reason and usage, its [DONE] may come in a later
    // read, and the rewriter ends its conversion on [DONE].
    if (!cut && !parser.error && !parser.sawMessageStop && !ex.aborted) {
      const out = rewriter === null ? CHAT_DONE : rewriter.push(CHAT_DONE);
      if (out.length > 0) scrubber.push(out);
    }
    if (!ex.aborted) scrubber.flush();
    // The stream is ended once its settlement is on the spool's disk (settlement-spool.ts); what is
    // queued for the client goes with its end.
    client.holdForEnd();
    void settleStream(ex, parser, delivered, parser.error
      ? providerErrorReason(parser.error.type)
      : whole ? null : REASON.streamCut, (billed) => client.end(lastWords(rewriter, billed, cut ? failedEvent : undefined)));
  };
  const complete = (): void => {
    finished = true;
    // The rest of the provider's body is not read, only drained for a moment (body-linger.ts): once
    // settled the request leaves the heartbeat's stall check, and a provider pinging on would hold
    // the pooled connection (and a relay's close) for as long as it pinged.
    lingeringBodies.hold(body);
    endStream();
  };
  body.on('end', () => {
    if (finished) lingeringBodies.release(body);
    else endStream(true);
  });
  body.on('error', (err: Error) => {
    if (finished) return;
    if (ex.aborted) return void settleStream(ex, parser, delivered, REASON.clientGoneMidStream);
    ex.done(200, 'stream_error');
    const cutByRelay = format.relayClosing?.cut === true && format.closingEvent !== undefined;
    if (cutByRelay) ex.ctx.log.info({ channel: ex.channel?.id, requestId: ex.requestId }, 'stream cut by this relay\'s shutdown, its grace over');
    else logRepeated(ex.ctx, 'warn', 'provider-stream-failed', ex.channel?.id, { channel: ex.channel?.id, requestId: ex.requestId, err: err.message }, 'provider stream failed');
    const lastEvent = cutByRelay ? format.closingEvent! : failedEvent;
    if (aligner !== null) {
      const held = aligner.salvage();
      if (held.length > 0) scrubber.push(held);
    }
    scrubber.flush();
    // The client already has a 200: it is told in the stream, as Anthropic does, once settled.
    client.holdForEnd();
    void settleStream(ex, parser, delivered, REASON.streamFailed, (billed) => client.end(lastWords(rewriter, billed, lastEvent)));
  });
}

/**
 * The client's side of one stream: the status line and headers, the chunks in order, then the end,
 * written in as few socket sends as the provider's timing allows.
 *
 * Why: outside a uWS callback every res.cork() ends in one send() to the client's socket, and those
 * sends were the largest cost of a stream on the relay's event loop (docs/performance.md). A
 * provider's answer often arrives in one socket read that undici hands over as several chunks and
 * its end within the same tick: written as they came, that was one send for the headers, one per
 * chunk and one for the end. Now the headers and the chunks are queued and written in one cork, at
 * the end of the tick they arrived in, or together with the end when the stream ends in that tick.
 * The client receives the same bytes, in the same order, with the same chunk framing (one write per
 * chunk), microseconds later at most; nothing waits for a later event.
 *
 * When: a flush is scheduled as a nextTick that queues a microtask. Node runs every pending nextTick
 * before any microtask, and the provider body's 'end' is emitted on a nextTick queued while undici
 * parses the read that ends it; so the 'end' handler runs first, and a stream settled synchronously
 * (it ended with its usage) writes everything queued with its end (end()). The settlement still
 * precedes the end on the wire: end() is only called once settled.
 */
class ClientStream {
  readonly #ex: StreamingExchange;
  readonly #requestIdHeader: string;
  readonly #onFull: () => void;
  /** The status line and headers are still to be written (with the first flush). */
  #headPending = true;
  #queue: (Buffer | string)[] = [];
  #scheduled = false;
  /** What the cork writes last (end()), or null for a flush that leaves the stream open. */
  #last: string | undefined | null = null;
  /** The last cork's writes found the client's socket full. */
  #full = false;
  /** holdForEnd() was called: flushes wait for end(). */
  #holding = false;
  readonly #corked = (): void => this.#writeCorked();
  readonly #flushNow = (): void => this.#flush();

  /** onFull: the client's socket took a write only into uWS's buffer: pause the provider until onWritable. */
  constructor(ex: StreamingExchange, requestIdHeader: string, onFull: () => void) {
    this.#ex = ex;
    this.#requestIdHeader = requestIdHeader;
    this.#onFull = onFull;
    // The headers go out at the end of this tick even if no chunk is there yet to go with them.
    this.#schedule();
  }

  /** Queues one chunk for the client (the chunk is kept, not copied: undici's and the rewriters' are not reused). */
  write(chunk: Buffer | string): void {
    this.#queue.push(chunk);
    this.#schedule();
  }

  /**
   * The stream's end is coming (end()): what is queued now waits to go with it, in one send, rather
   * than in a flush of its own just before.
   */
  holdForEnd(): void {
    this.#holding = true;
  }

  /** Writes what is queued and ends the stream, `last` (if any) as its last bytes. */
  end(last: string | undefined): void {
    const ex = this.#ex;
    if (ex.aborted || ex.responded) return;
    ex.responded = true;
    this.#last = last;
    ex.res.cork(this.#corked);
  }

  /** The provider's request id; without one, the gateway's (the SDKs read it as the request's id). */
  #requestId(): string {
    const ex = this.#ex;
    return ex.upstreamRequestId || ex.requestId;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    process.nextTick(queueMicrotask, this.#flushNow);
  }

  #flush(): void {
    this.#scheduled = false;
    const ex = this.#ex;
    // A client gone gets nothing more; an ended stream already wrote its queue with its end.
    if (ex.aborted || ex.responded) {
      this.#queue.length = 0;
      return;
    }
    if (this.#holding || (!this.#headPending && this.#queue.length === 0)) return;
    this.#last = null;
    ex.res.cork(this.#corked);
    if (this.#full) {
      this.#full = false;
      this.#onFull();
    }
  }

  /** Inside res.cork(): the head if pending, the queued chunks, and the end for end(). */
  #writeCorked(): void {
    const res = this.#ex.res;
    if (this.#headPending) {
      this.#headPending = false;
      res.writeStatus('200 OK')
        .writeHeader('content-type', 'text/event-stream; charset=utf-8')
        .writeHeader('cache-control', 'no-cache')
        .writeHeader(this.#requestIdHeader, this.#requestId())
        .writeHeader('x-gateway-request-id', this.#ex.requestId);
      writeCorsHeaders(res);
      // A stream cannot end with uWS's closeConnection (the socket closes before the last chunk): the
      // client is told to hang up instead (connection-draining.ts).
      if (closesConnection()) res.writeHeader('connection', 'close');
    }
    const queue = this.#queue;
    // Every queued chunk is written even after one reports a full socket: uWS buffers all of a
    // write, and they are at most what one read of the provider's socket held.
    for (let i = 0; i < queue.length; i++) if (!res.write(queue[i]!)) this.#full = true;
    queue.length = 0;
    if (this.#last !== null) res.end(this.#last);
  }
}

/**
 * What a stream ends with: the events a converting rewriter held for the usage billed (its usage
 * chunk and [DONE], its message_delta and message_stop), then `last` (the failed event, if any).
 */
function lastWords(rewriter: StreamRewriter | null, billed: StreamUsage | null, last: string | undefined): string | undefined {
  const held = rewriter?.heldEndEvents?.(billed) ?? '';
  if (held === '') return last;
  return last === undefined ? held : held + last;
}

/**
 * The provider's output is the final usage: stated as a count, with no content after it. Anything
 * else (none stated, or content that followed it) is billed the larger of it and the delivered text.
 */
function finalUsage(p: StreamMeter): boolean {
  return p.sawMessageDelta && !p.contentAfterUsage;
}

/**
 * What the provider stated of its output is what it generated: its final usage, and a count above 0
 * unless nothing was delivered (a stated 0 for a stream that delivered content is no count either,
 * since a provider cannot have generated that content for nothing). Else the delivered text is counted.
 */
export function outputStatedInFull(p: StreamMeter): boolean {
  return finalUsage(p) && (p.outputTokens > 0 || p.contentDeltas === 0);
}

/**
 * The stream began: a message_start (or a Chat Completions chunk), content, or the end of a
 * generation came. One that did not stated and delivered nothing: it is billed nothing, its end is
 * not passed on, and it counts against its channel.
 */
function streamBegan(p: StreamMeter): boolean {
  return p.sawMessageStart || p.contentDeltas > 0 || p.generationDone || p.sawMessageDelta;
}

/**
 * Settles a stream, then calls `settled` (which ends the client's stream): with the provider's final
 * usage when it sent one, pending delivered text dropped uncounted; otherwise with the larger of the
 * output it stated (if any) and the exact token count of the text delivered. An input the provider did
 * not state as a count is the relay's count of the prompt. What the provider states is taken when it
 * is a count (the meters): a stated output of 0 for a stream that delivered content is no final usage
 * either, since a provider cannot have generated that content for nothing.
 * `partialReason` null means the stream completed.
 */
async function settleStream(ex: StreamingExchange, parser: StreamMeter, delivered: DeliveredTextCounter, partialReason: string | null, settled?: (billed: StreamUsage | null) => void): Promise<void> {
  // Nothing began: the provider stated and delivered nothing, so the request failed, as one whose
  // provider never answered (an error row at 0), rather than a consumption of nothing.
  if (partialReason !== null && !streamBegan(parser)) {
    delivered.discard();
    ex.finish({ kind: 'failed', reason: partialReason });
    if (settled) ex.afterSettled(() => settled(null));
    return;
  }
  // A Chat Completions stream states its input only with its final usage, and an Anthropic provider
  // may leave it out of message_start (or state it below 0, or as 0 for a prompt that has at least one
  // token, or in a message_start the meter could not read): billed as 0, the prompt would be free.
  // Counted on a worker, alongside the delivered text, whenever the stream began, delivered content or
  // ended its generation: anything the provider bills.
  const prompt = !parser.inputStated && streamBegan(parser)
    ? countedInput(ex, parser)
    : null;
  let usage: StreamUsage;
  if (outputStatedInFull(parser)) {
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
    // A usage stated before content that followed it (some servers state one with every chunk, or
    // only first) still counts what it said; cumulative, it is a floor.
    if (parser.sawMessageDelta) output = Math.max(output, parser.outputTokens);
    usage = { inputTokens: parser.inputTokens, outputTokens: output, cacheCreationTokens: parser.cacheCreationTokens, cacheCreation1hTokens: parser.cacheCreation1hTokens, cacheReadTokens: parser.cacheReadTokens, webSearchRequests: parser.webSearchRequests, flexServed: parser.flexServed };
  }
  if (prompt !== null) usage.inputTokens = await prompt;
  if (partialReason === null) ex.finish({ kind: 'ok', usage });
  else ex.finish({ kind: 'partial', usage, reason: partialReason });
  // The figures the ledger has (settleExchange bounds them alike), which a converted stream tells.
  if (settled) ex.afterSettled(() => settled(usageAsBilled(usage, ex.usageBound)));
}

/** The prompt's count as the provider's input_tokens would say it: less the cache reads and writes it did state, billed apart. */
async function countedInput(ex: StreamingExchange, parser: StreamMeter): Promise<number> {
  try {
    return Math.max(0, await ex.countPromptTokens() - parser.cacheReadTokens - parser.cacheCreationTokens);
  } catch (err) {
    ex.ctx.log.warn({ err, requestId: ex.requestId }, 'prompt count of a stream without input usage failed; its input is not billed');
    return parser.inputTokens;
  }
}

function snapshot(p: StreamMeter): StreamUsage {
  // A cut stream has no final message_delta: each text delta passed on is one token of the mock and
  // a lower bound for real providers; the exact count of delivered text is the token counter's job.
  const output = outputStatedInFull(p) ? p.outputTokens : Math.max(p.outputTokens, p.contentDeltas);
  return { inputTokens: p.inputTokens, outputTokens: output, cacheCreationTokens: p.cacheCreationTokens, cacheCreation1hTokens: p.cacheCreation1hTokens, cacheReadTokens: p.cacheReadTokens, webSearchRequests: p.webSearchRequests, flexServed: p.flexServed };
}

/**
 * Models of OpenAI-format providers that reason without streaming it, billing it in the final usage:
 * OpenAI's o-series and gpt-5 (outputLimitField's), Gemini 2.5 and later over Google's
 * OpenAI-compatible API (thinking on by default), xAI's grok-4 and grok-3-mini.
 */
const HIDDEN_REASONING_MODEL = /^(?:[\w.-]+\/)?(?:gemini-(?:2\.5|[3-9])|grok-(?:[4-9]|3-mini))/i;

/**
 * Whether what the provider bills for a stream only its final usage says, so that cutting it when
 * its client leaves would bill a guess: output it generates without streaming it (OpenAI's reasoning
 * models stream none of their reasoning; Claude's extended thinking streams a summary of what it
 * bills in full), server tools billed per use (Anthropic states its web searches only in
 * message_delta), or, from an OpenAI-format provider, which states its prompt only at the end, a
 * prompt the relay cannot count (images: gpt-4o-mini bills 25,501 tokens for one the relay would
 * count 1,600). Such a stream is read on to its final usage when its client leaves. `model`: the name
 * the channel is sent (its model_mapping's), not the client's alias.
 */
export function billedByFinalUsage(protocol: 'anthropic' | 'openai', model: string, request: {
  /** The Anthropic-form request's `thinking` (a client's reasoning_effort to an Anthropic channel becomes one). */
  thinking?: unknown;
  /** An OpenAI client's reasoning_effort, passed to an OpenAI-format channel. */
  reasoningEffort?: unknown;
  /** The prompt holds media, documents or blocks the relay cannot count. */
  promptUncountable: boolean;
  /** The request offers server tools billed per use (web search). */
  serverTools?: boolean;
}): boolean {
  if (protocol === 'anthropic') {
    // An OpenAI-format channel is sent no `thinking` (from-messages.ts): only an Anthropic one thinks.
    const thinking = request.thinking as { type?: unknown } | null | undefined;
    return (thinking !== null && typeof thinking === 'object' && thinking.type !== 'disabled') || request.serverTools === true;
  }
  if (request.promptUncountable || outputLimitField(model) === 'max_completion_tokens' || HIDDEN_REASONING_MODEL.test(model)) return true;
  const effort = request.reasoningEffort;
  return typeof effort === 'string' && effort !== 'none';
}
