// The chaos suite's client: concurrent loops through the official SDK, streaming and not, each
// request a single attempt (maxRetries 0), so that "answered" means exactly what this client saw.
// Every complete answer is recorded with the gateway's request id (x-gateway-request-id): the audit
// checks that each one is billed and logged exactly once.
import Anthropic from '@anthropic-ai/sdk';
import { bodyJson, type BodySpec } from '../../bench/scenarios.js';

/** The bench's model names, priced by bench/lib/fixtures.ts: a non-streaming and a streaming one. */
export const CHAOS_BODIES: readonly BodySpec[] = [
  { model: 'bench-small', maxTokens: 16, stream: false },
  { model: 'bench-stream-64', maxTokens: 64, stream: true },
];

export interface Answered {
  requestId: string;
  model: string;
  outputTokens: number;
}

export interface LoadFigures {
  sent: number;
  answered: Answered[];
  /** Refused or failed requests, by what the client saw (status, or the error's name). */
  failed: Map<string, number>;
}

export class Load {
  readonly figures: LoadFigures = { sent: 0, answered: [], failed: new Map() };
  #running = false;
  #loops: Promise<void>[] = [];
  readonly #client: Anthropic;

  constructor(relayUrl: string, apiKey: string, readonly concurrency: number) {
    this.#client = new Anthropic({ apiKey, baseURL: relayUrl, maxRetries: 0, timeout: 120_000 });
  }

  start(): void {
    this.#running = true;
    for (let i = 0; i < this.concurrency; i++) this.#loops.push(this.#loop(i));
  }

  /** Stops sending and waits for the requests in flight to end. */
  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#loops);
    this.#loops = [];
  }

  /** One request outside the loops (the recovery probe): its request id once answered, else null. */
  async once(spec: BodySpec = CHAOS_BODIES[0]!): Promise<string | null> {
    try {
      return (await this.#send(spec)).requestId;
    } catch {
      return null;
    }
  }

  async #loop(i: number): Promise<void> {
    let n = i;
    while (this.#running) {
      const spec = CHAOS_BODIES[n++ % CHAOS_BODIES.length]!;
      this.figures.sent++;
      try {
        this.figures.answered.push(await this.#send(spec));
      } catch (err) {
        const key = err instanceof Anthropic.APIError && err.status !== undefined ? String(err.status) : (err as Error).name || 'error';
        this.figures.failed.set(key, (this.figures.failed.get(key) ?? 0) + 1);
        // A relay that is down refuses at once: do not spin.
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async #send(spec: BodySpec): Promise<Answered> {
    const body = JSON.parse(bodyJson(spec)) as { model: string; max_tokens: number; messages: Anthropic.MessageParam[] };
    if (!spec.stream) {
      const { data, response } = await this.#client.messages.create({ model: body.model, max_tokens: body.max_tokens, messages: body.messages }).withResponse();
      return { requestId: response.headers.get('x-gateway-request-id') ?? '', model: spec.model, outputTokens: data.usage.output_tokens };
    }
    const stream = this.#client.messages.stream({ model: body.model, max_tokens: body.max_tokens, messages: body.messages });
    const { response } = await stream.withResponse();
    const message = await stream.finalMessage();
    return { requestId: response.headers.get('x-gateway-request-id') ?? '', model: spec.model, outputTokens: message.usage.output_tokens };
  }
}
