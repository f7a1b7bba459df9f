// The relay's settlements on local disk until Redis has taken them (docs/billing.md, "Settle"): a
// settlement held only in memory is lost with the process, and its request served free.
//
// One append-only file per relay process, `relay-<pid>-<random>.spool` under the directory: a line
// `S\t<settlement JSON without its event>\t<event JSON>` once the request is priced, a line
// `D <requestId>` once Redis answered the settle script. The event is written as encodeUsageEvent
// gave it (it holds no raw tab or newline), the same text that goes to Redis, not escaped again into
// the settlement's JSON.
//
// Writes per loop turn, not per request: the settlement lines of one turn (every answer that ended in
// it) go to disk in one synchronous write(2), at the end of the turn (setImmediate), and the client's
// answer is ended only after it (afterWritten). Done lines gate nothing: they ride along with the next
// write of settlement lines, or go on their own after DONE_LINES_WAIT_MS when none comes. Each write
// has no fsync: the kernel keeps it whatever happens to the process (kill -9 included). A machine
// crash can lose the lines the kernel had not yet written back; fsync in small groups (every few ms)
// would cover that at the price of a disk flush per group (0.14-0.16 ms per fsync on the development
// machine's disk, far more on a busy or network disk) plus holding each answer's end until its group
// is flushed: this relay does not pay it.
//
// A relay starting up takes over the files of relays that are no longer running and replays their
// pending settlements in order, as it does its own stalled ones when Redis answers again, and every
// RELAY_SPOOL_REPLAY_INTERVAL_MS while any is stalled (a Redis paused with SIGSTOP, or behind a
// network black hole, resumes on the same connection: no 'ready' says it is back).
//
// A file names its relay's host (a hash of the host name and the pid namespace) and pid: a file of
// this host is taken once its pid is gone; a file of another host (containers sharing one volume,
// where every relay may be pid 1) once it has not changed for FOREIGN_STALE_MS, as a live relay
// touches its file every TOUCH_MS and looks for such files again on that clock. The pid alone made a
// relay in one container take over the live file of a relay in another (the same pid 1), which then
// wrote on into an unlinked file: its settlements were lost if it was killed.
// settleReservations-7n.lua is idempotent per reservation, so a settlement replayed after Redis
// had already taken it changes nothing (it answers -6).
import { closeSync, futimesSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, renameSync, rmdirSync, statSync, unlinkSync, utimesSync, writeSync, ftruncateSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '../../infra/logger.js';
import type { SettleRequest } from '../../core/quota/quota-store.js';
import type { ReplicationCheck } from './settlement-confirm.js';

/** The files of the spools open in this process (tests run several relays in one). */
const openHere = new Set<string>();
/** relay-h<host>-<pid>-<random>; relays before the host part wrote relay-<pid>-<random>. */
const FILE_PATTERN = /^relay-(?:h([0-9a-f]{8})-)?(\d+)-[0-9a-f]+\.(spool|claimed)$/;
/** How often a live relay touches its file (and looks for other hosts' stale files). */
const TOUCH_MS = 10_000;
/** A file of another host unchanged this long is a dead relay's. */
const FOREIGN_STALE_MS = 60_000;

/** This host's part of a file name: the host name and the pid namespace, whose pids the file's pid is one of. */
function hostId(): string {
  let ns = '';
  try {
    ns = readlinkSync('/proc/self/ns/pid');
  } catch {
    // Not Linux, or /proc not mounted: the host name alone.
  }
  return createHash('sha1').update(`${hostname()}\0${ns}`).digest('hex').slice(0, 8);
}
const HOST = hostId();
/** A file whose every settlement is done is emptied once it holds this much. */
const TRUNCATE_BYTES = 64 * 1024;
/**
 * Past this, and past twice what its pending lines take (so that rewriting them costs at most what was
 * written since), the file is rewritten with its pending lines alone.
 */
const COMPACT_BYTES = 4 * 1024 * 1024;
/**
 * How long done lines wait for a write of settlement lines to go with, before they are written on
 * their own (a quiet relay). One lost to a kill only makes the next relay replay a settlement Redis
 * already has, which the settle script answers "already settled".
 */
const DONE_LINES_WAIT_MS = 50;

interface Entry {
  readonly s: SettleRequest;
  readonly line: string;
  /** Its settle attempts gave up (Redis down): the next replay takes it. */
  stalled: boolean;
}

export class SettlementSpool {
  readonly #dir: string;
  readonly #path: string;
  readonly #log: Logger;
  #fd: number;
  #bytes = 0;
  /** What the pending settlements' lines take (utf-16 units: near enough for the compaction rule). */
  #pendingBytes = 0;
  readonly #pending = new Map<string, Entry>();
  #replaying = false;
  #writeErrors = 0;
  /** Settlements whose retries gave up, not yet replayed. */
  #stalledCount = 0;
  #replayTimer: NodeJS.Timeout | null = null;
  #touchTimer: NodeJS.Timeout | null = null;
  /** With replicas (settlement-confirm.ts): settlements Redis took are done only once replicas have them. */
  #replicated: ReplicationCheck | null = null;
  /** Taken by Redis, waiting for the next replication check. */
  #unconfirmed: SettleRequest[] = [];
  #confirming = false;
  /** Settlement lines added in this loop turn, written together at its end (#flush). */
  #unwritten = '';
  /** Called once #unwritten is on disk: the ends of the answers whose settlements it holds. */
  #afterWrite: (() => void)[] = [];
  #flushScheduled = false;
  /** Done lines not yet written: with the next settlement lines, or by #doneTimer. */
  #doneLines = '';
  #doneTimer: NodeJS.Timeout | null = null;

  private constructor(dir: string, log: Logger) {
    this.#dir = dir;
    this.#log = log;
    this.#path = join(dir, `relay-h${HOST}-${process.pid}-${randomBytes(4).toString('hex')}.spool`);
    this.#fd = openSync(this.#path, 'a');
    openHere.add(this.#path);
    // Alive to relays on other hosts sharing the directory; theirs, once stale, are taken over.
    this.#touchTimer = setInterval(() => {
      try {
        const now = new Date();
        if (this.#fd >= 0) futimesSync(this.#fd, now, now);
        this.#adoptOrphans();
      } catch (err) {
        this.#log.warn({ err: (err as Error).message }, 'settlement spool: touch or takeover failed');
      }
    }, TOUCH_MS);
    this.#touchTimer.unref();
  }

  /** The spool of this process in `dir`, holding the pending settlements of relays gone before it. */
  static open(dir: string, log: Logger): SettlementSpool {
    mkdirSync(dir, { recursive: true });
    const spool = new SettlementSpool(dir, log);
    spool.#adoptOrphans();
    return spool;
  }

  get path(): string { return this.#path; }
  get pendingCount(): number { return this.#pending.size; }
  get stalledCount(): number { return this.#stalledCount; }
  /** Settlements Redis took wait for (or are in) a replication check: a draining relay waits for it. */
  get confirming(): boolean { return this.#confirming; }

  /**
   * Writes the settlement down at the end of this loop turn, with the others of the turn; the
   * client's answer is ended in afterWritten.
   */
  add(s: SettleRequest): void {
    if (this.#pending.has(s.requestId)) return;
    const line = settlementLine(s);
    this.#pending.set(s.requestId, { s, line, stalled: false });
    this.#pendingBytes += line.length;
    this.#unwritten += line;
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(this.#flush);
    }
  }

  /**
   * Calls `then` once every settlement added so far is on disk: at once when it is, else at the end
   * of this loop turn. `then` ends a client's answer, so a relay killed before it leaves a settlement
   * behind for the next one's replay, never an answer without its settlement.
   */
  afterWritten(then: () => void): void {
    if (this.#unwritten === '') then();
    else this.#afterWrite.push(then);
  }

  /** From now on a settlement Redis took leaves the spool only once `check` says its replicas have it. */
  confirmReplicationWith(check: ReplicationCheck): void {
    this.#replicated = check;
  }

  /**
   * Redis answered the settle script: done, or with replicas once they have it (checked for all the
   * settlements answered meanwhile at once); one they are not confirmed to have is replayed later.
   */
  settled(requestId: string): void {
    if (this.#replicated === null) return this.done(requestId);
    const e = this.#pending.get(requestId);
    if (!e) return;
    this.#unconfirmed.push(e.s);
    if (!this.#confirming) {
      this.#confirming = true;
      setImmediate(() => void this.#confirm());
    }
  }

  async #confirm(): Promise<void> {
    while (this.#unconfirmed.length > 0) {
      const batch = this.#unconfirmed;
      this.#unconfirmed = [];
      let confirmed = new Set<string>();
      try {
        confirmed = new Set((await this.#replicated!(batch)).map((s) => s.requestId));
      } catch (err) {
        this.#log.warn({ err: (err as Error).message }, 'settlement replication check failed; replayed later');
      }
      for (const s of batch) {
        if (confirmed.has(s.requestId)) this.done(s.requestId);
        else this.stalled(s.requestId);
      }
      if (confirmed.size < batch.length) this.#log.warn({ unconfirmed: batch.length - confirmed.size }, 'settlements not confirmed on a replica; kept in the spool for replay');
    }
    this.#confirming = false;
  }

  /** Redis took the settlement (or had it already), and its replicas too where asked: it leaves the spool. */
  done(requestId: string): void {
    const e = this.#pending.get(requestId);
    if (!e) return;
    this.#pending.delete(requestId);
    if (e.stalled) this.#stalledCount--;
    this.#pendingBytes -= e.line.length;
    this.#doneLines += `D ${requestId}\n`;
    if (!this.#flushScheduled && this.#doneTimer === null) {
      this.#doneTimer = setTimeout(this.#flush, DONE_LINES_WAIT_MS);
      this.#doneTimer.unref();
    }
  }

  /** One write for what the turn added and the done lines so far, then the answers that waited for it. */
  readonly #flush = (): void => {
    this.#flushScheduled = false;
    if (this.#doneTimer !== null) {
      clearTimeout(this.#doneTimer);
      this.#doneTimer = null;
    }
    // Settlement lines before done lines: a done line's settlement is in an earlier write or this one.
    const text = this.#unwritten + this.#doneLines;
    const hadDone = this.#doneLines !== '';
    this.#unwritten = '';
    this.#doneLines = '';
    if (text !== '') this.#write(text);
    if (this.#afterWrite.length > 0) {
      const waiting = this.#afterWrite;
      this.#afterWrite = [];
      for (let i = 0; i < waiting.length; i++) {
        try {
          waiting[i]!();
        } catch (err) {
          // One answer's failure must not keep the others of the turn from ending.
          this.#log.error({ err }, 'ending an answer after its settlement was written failed');
        }
      }
    }
    if (hadDone && (this.#pending.size === 0 ? this.#bytes >= TRUNCATE_BYTES : this.#bytes >= COMPACT_BYTES && this.#bytes >= 2 * this.#pendingBytes)) this.#compact();
  };

  /** Its retries gave up: kept for the next replay. */
  stalled(requestId: string): void {
    const e = this.#pending.get(requestId);
    if (e && !e.stalled) {
      e.stalled = true;
      this.#stalledCount++;
    }
  }

  /**
   * Replays every `intervalMs` while settlements are stalled: the relay's Redis may come back without
   * its connection having dropped (a paused process, a network black hole), and no 'ready' follows.
   * Stopped by close().
   */
  replayEvery(intervalMs: number, settle: (s: SettleRequest) => Promise<unknown>): void {
    if (this.#replayTimer) clearInterval(this.#replayTimer);
    this.#replayTimer = setInterval(() => {
      if (this.#stalledCount > 0) this.replay(settle).catch((err: unknown) => this.#log.error({ err }, 'settlement spool replay failed'));
    }, intervalMs);
    this.#replayTimer.unref();
  }

  /**
   * Settles the stalled settlements one after the other, in the order they were written; stops at the
   * first failure (Redis is down again: the next replay resumes there). At start-up and on each
   * 'ready' of the relay's Redis connection.
   */
  async replay(settle: (s: SettleRequest) => Promise<unknown>): Promise<number> {
    if (this.#replaying) return 0;
    this.#replaying = true;
    let n = 0;
    try {
      for (const [id, e] of [...this.#pending]) {
        if (!e.stalled) continue;
        e.stalled = false;
        this.#stalledCount--;
        try {
          await settle(e.s);
        } catch (err) {
          e.stalled = true;
          this.#stalledCount++;
          this.#log.warn({ err: (err as Error).message, pending: this.#pending.size }, 'settlement spool replay stopped; Redis failed again');
          break;
        }
        this.settled(id);
        n++;
      }
    } finally {
      this.#replaying = false;
    }
    if (n > 0) this.#log.info({ replayed: n, pending: this.#pending.size }, 'settlement spool replayed');
    return n;
  }

  /** Closes the file; removes it when nothing in it is pending (else the next relay replays it). */
  close(): void {
    if (this.#replayTimer) clearInterval(this.#replayTimer);
    this.#replayTimer = null;
    if (this.#touchTimer) clearInterval(this.#touchTimer);
    this.#touchTimer = null;
    if (this.#fd < 0) return;
    this.#flush();
    closeSync(this.#fd);
    this.#fd = -1;
    openHere.delete(this.#path);
    if (this.#pending.size === 0) {
      try {
        unlinkSync(this.#path);
        rmdirSync(this.#dir);
      } catch {
        // Other relays' files are there, or the directory is shared: it stays.
      }
    }
  }

  #write(line: string): void {
    if (this.#fd < 0) return;
    try {
      this.#bytes += writeSync(this.#fd, line);
    } catch (err) {
      // A full or failing disk must not cost the answer nor the settlement, which still goes to
      // Redis from memory as it did before the spool: only its protection against a kill is lost.
      this.#writeErrors++;
      if (this.#writeErrors === 1 || this.#writeErrors % 1000 === 0) this.#log.error({ err, path: this.#path, errors: this.#writeErrors }, 'settlement spool write failed');
    }
  }

  #compact(): void {
    if (this.#pending.size === 0) {
      ftruncateSync(this.#fd, 0);
      this.#bytes = 0;
      return;
    }
    // Written aside then renamed: a kill at any point leaves either the old file or the new one whole.
    const tmp = `${this.#path}.tmp`;
    let text = '';
    for (const e of this.#pending.values()) text += e.line;
    const fd = openSync(tmp, 'w');
    writeSync(fd, text);
    closeSync(fd);
    renameSync(tmp, this.#path);
    closeSync(this.#fd);
    this.#fd = openSync(this.#path, 'a');
    this.#bytes = Buffer.byteLength(text);
  }

  /** Takes over the files of relays no longer running: their pending settlements become this spool's. */
  #adoptOrphans(): void {
    const orphans: { path: string; mtime: number }[] = [];
    for (const name of readdirSync(this.#dir)) {
      const m = FILE_PATTERN.exec(name);
      const path = join(this.#dir, name);
      if (!m || openHere.has(path) || !isOrphan(path, m[1], Number(m[2]))) continue;
      // Renamed first, so that two relays starting together never both replay one file.
      const claimed = join(this.#dir, `relay-h${HOST}-${process.pid}-${randomBytes(4).toString('hex')}.claimed`);
      try {
        renameSync(path, claimed);
        const mtime = statSync(claimed).mtimeMs;
        // Fresh, so that a relay of another host does not take it for stale while this one reads it.
        const now = new Date();
        utimesSync(claimed, now, now);
        orphans.push({ path: claimed, mtime });
      } catch {
        // Another relay claimed it first.
      }
    }
    orphans.sort((a, b) => a.mtime - b.mtime);
    for (const o of orphans) {
      for (const s of pendingIn(readFileSync(o.path, 'utf8'))) {
        if (this.#pending.has(s.requestId)) continue;
        this.add(s);
        this.stalled(s.requestId);
      }
      // Its pending lines are in this spool's file once written, before the file goes.
      this.#flush();
      unlinkSync(o.path);
    }
    if (orphans.length > 0 && this.#pending.size > 0) this.#log.warn({ pending: this.#pending.size, files: orphans.length }, 'settlement spool: settlements of a stopped relay to replay');
  }
}

/** A settlement's spool line: its fields as JSON, then its event as encoded, tab-separated. */
export function settlementLine(s: SettleRequest): string {
  const { eventJson, ...fields } = s;
  return `S\t${JSON.stringify(fields)}\t${eventJson}\n`;
}

/**
 * The settlements of a spool file not followed by their done line, in order; a torn last line is
 * skipped. Reads the lines of older relays too (`S <settlement JSON>`, the event inside it).
 */
export function pendingIn(text: string): SettleRequest[] {
  const pending = new Map<string, SettleRequest>();
  for (const line of text.split('\n')) {
    if (line.startsWith('D ')) pending.delete(line.slice(2));
    else if (line.startsWith('S')) {
      const s = parseSettlementLine(line);
      // null: a line torn by a machine crash (no fsync), unreadable, so skipped.
      if (s !== null) pending.set(s.requestId, s);
    }
  }
  return [...pending.values()];
}

function parseSettlementLine(line: string): SettleRequest | null {
  try {
    if (line.startsWith('S ')) return JSON.parse(line.slice(2)) as SettleRequest;
    const tab = line.indexOf('\t', 2);
    if (line[1] !== '\t' || tab < 0) return null;
    const eventJson = line.slice(tab + 1);
    // A torn event is as unreadable as a torn settlement: Redis would refuse to log it.
    JSON.parse(eventJson);
    return { ...(JSON.parse(line.slice(2, tab)) as Omit<SettleRequest, 'eventJson'>), eventJson };
  } catch {
    return null;
  }
}

/** Whether the file of relay `pid` on host `host` (undefined: a relay from before the host part, taken as this host's) is a dead relay's. */
function isOrphan(path: string, host: string | undefined, pid: number): boolean {
  if (host === undefined || host === HOST) return !isRunning(pid);
  try {
    return Date.now() - statSync(path).mtimeMs > FOREIGN_STALE_MS;
  } catch {
    // Gone meanwhile (its relay closed it, or another took it over).
    return false;
  }
}

function isRunning(pid: number): boolean {
  // This process's own pid on a file no spool of it holds open: a previous relay in a container that
  // reuses pids.
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
