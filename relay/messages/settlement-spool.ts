// The relay's settlements on local disk until Redis has taken them (docs/billing.md, "Settle"): a
// settlement held only in memory is lost with the process, and its request served free.
//
// One append-only file per relay process, `relay-d<database>-h<host>-<pid>-<random>.spool` under the directory: a line
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
// where every relay may be pid 1) once this relay has watched it not change for FOREIGN_STALE_MS, as
// a live relay touches its file every TOUCH_MS and looks for such files again on that clock. The pid
// alone made a relay in one container take over the live file of a relay in another (the same pid 1),
// which then wrote on into an unlinked file: its settlements were lost if it was killed. Its mtime
// against this host's clock did the same whenever the two clocks were FOREIGN_STALE_MS - TOUCH_MS
// apart, so only a change this relay saw itself counts, on a clock that never steps. A relay whose
// file was taken all the same (an older relay took it, or its process stalled that long) notices on
// its next touch and writes its pending settlements to a new file.
// A file names its database too (SpoolOptions.database): a relay takes over only its own database's.
// settleReservations-9n.lua is idempotent per reservation, so a settlement replayed after Redis
// had already taken it changes nothing (it answers -6).
import { closeSync, constants, fstatSync, futimesSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, renameSync, rmdirSync, statSync, unlinkSync, utimesSync, writeSync, ftruncateSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from '../../infra/logger.js';
import type { SettleRequest } from '../../core/quota/quota-store.js';
import type { ReplicationCheck } from './settlement-confirm.js';
import { relayMetrics } from '../metrics/relay-metrics.js';

/** The files of the spools open in this process (tests run several relays in one). */
const openHere = new Set<string>();
/**
 * relay-d<database>-h<host>-<pid>-<random>; relays before the database part wrote
 * relay-h<host>-<pid>-<random>, and before the host part relay-<pid>-<random>.
 */
const FILE_PATTERN = /^relay-(?:d([0-9a-f]{12})-)?(?:h([0-9a-f]{8})-)?(\d+)-[0-9a-f]+\.(spool|claimed)$/;
/** How often a live relay touches its file (and looks for other hosts' stale files). */
const TOUCH_MS = 10_000;
/** A file of another host this relay has seen unchanged this long is a dead relay's. */
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
/**
 * After a compaction the disk refused (full, failing, read-only), the file is appended to as it is
 * and compacted again no sooner than this: trying on every turn would rewrite every pending line per
 * turn into a disk that refuses them.
 */
const COMPACT_RETRY_MS = 10_000;
/** A new file taking the path: created or emptied, and appended to like the one it replaces. */
const REWRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_APPEND;

export interface SpoolOptions {
  /** Milliseconds on a clock that does not step with the wall clock; tests drive their own. */
  now?: () => number;
  /**
   * The database whose accounts the settlements bill (database_instance's id): files name it, and a
   * relay takes over only its own database's (and files from before names held it). Without it, a
   * relay of another gateway sharing the directory (the same RELAY_SPOOL_DIR and REDIS_PREFIX: two
   * stacks started from one checkout) took a dead relay's file and replayed it into its own Redis,
   * where no reservation matched: the requests went unbilled in both.
   */
  database?: string;
}

/** A database's part of a file name. */
function databasePart(database: string): string {
  return createHash('sha1').update(database).digest('hex').slice(0, 12);
}

/** What a file of another host was when this relay first saw it so. */
interface Sighting {
  mtimeMs: number;
  size: number;
  ino: number;
  /** When this relay saw it so first, on its own clock. */
  since: number;
  /** The last look that found it: files gone are forgotten. */
  look: number;
}

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
  readonly #now: () => number;
  /** A compaction failed: none before this (#now). */
  #compactRetryAt = 0;
  /** A write failed, maybe partway: the next one starts on a line of its own. */
  #torn = false;
  /** Other hosts' files as this relay saw them (#isOrphan). */
  readonly #sightings = new Map<string, Sighting>();
  /** This spool's database part of file names (databasePart), if it was given one. */
  readonly #database: string | undefined;
  /** The start of this spool's file names, before their random part. */
  readonly #prefix: string;
  #look = 0;

  private constructor(dir: string, log: Logger, now: () => number, database: string | undefined) {
    this.#dir = dir;
    this.#log = log;
    this.#now = now;
    this.#database = database === undefined ? undefined : databasePart(database);
    this.#prefix = `relay-${this.#database === undefined ? '' : `d${this.#database}-`}h${HOST}-${process.pid}-`;
    this.#path = join(dir, `${this.#prefix}${randomBytes(4).toString('hex')}.spool`);
    this.#fd = openSync(this.#path, 'a');
    openHere.add(this.#path);
    // Alive to relays on other hosts sharing the directory; theirs, once stale, are taken over.
    this.#touchTimer = setInterval(() => {
      try {
        if (this.#fd >= 0) {
          if (this.#taken()) this.#reclaim();
          else {
            const now = new Date();
            futimesSync(this.#fd, now, now);
          }
        }
        this.#adoptOrphans();
      } catch (err) {
        this.#log.warn({ err: (err as Error).message }, 'settlement spool: touch or takeover failed');
      }
    }, TOUCH_MS);
    this.#touchTimer.unref();
  }

  /** The spool of this process in `dir`, holding the pending settlements of relays gone before it. */
  static open(dir: string, log: Logger, opts: SpoolOptions = {}): SettlementSpool {
    mkdirSync(dir, { recursive: true });
    const spool = new SettlementSpool(dir, log, opts.now ?? (() => performance.now()), opts.database);
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
  replayEvery(intervalMs: number, settle: (s: SettleRequest) => Promise<boolean>): void {
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
  async replay(settle: (s: SettleRequest) => Promise<boolean>): Promise<number> {
    if (this.#replaying) return 0;
    this.#replaying = true;
    let n = 0;
    // Settlements whose reservation Redis no longer held (settle answered false).
    const unmatched: string[] = [];
    try {
      for (const [id, e] of [...this.#pending]) {
        if (!e.stalled) continue;
        e.stalled = false;
        this.#stalledCount--;
        try {
          if (!(await settle(e.s))) unmatched.push(e.s.requestId);
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
    if (n > 0) this.#log.info({ replayed: n, pending: this.#pending.size, noReservation: unmatched.length }, 'settlement spool replayed');
    // Settled before the relay stopped (its Redis took the settlement, the spool's done line was lost
    // with the process), or the reservation went with Redis's data (a Redis restarted without
    // persistence, a data directory deleted): on one Redis the two look alike, and the second is a
    // request served without a debit. Said, with the ids, so an operator who lost Redis's data can
    // reconcile them (docs/billing.md).
    if (unmatched.length > 0) {
      relayMetrics.settlementsUnmatched.value += unmatched.length;
      this.#log.warn({ count: unmatched.length, requestIds: unmatched.slice(0, 20) },
        'replayed settlements found no reservation: already settled, or their reservations were lost with Redis\'s data (then not billed)');
    }
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

  #write(text: string): void {
    if (this.#fd < 0) return;
    try {
      // Unended, a torn line would make the first line of this write unreadable too.
      this.#bytes += writeAll(this.#fd, this.#torn ? `\n${text}` : text);
      this.#torn = false;
    } catch (err) {
      // A full or failing disk must not cost the answer nor the settlement, which still goes to
      // Redis from memory as it did before the spool: only its protection against a kill is lost.
      this.#torn = true;
      this.#writeErrors++;
      if (this.#writeErrors === 1 || this.#writeErrors % 1000 === 0) this.#log.error({ err, path: this.#path, errors: this.#writeErrors }, 'settlement spool write failed');
    }
  }

  /**
   * Runs from #flush (setImmediate, a timer), where an exception is uncaught and the relay's process
   * guard exits, cutting every stream: a disk that refuses only leaves the file as it is, for later.
   */
  #compact(): void {
    if (this.#now() < this.#compactRetryAt) return;
    if (this.#pending.size > 0) {
      this.#rewrite();
      return;
    }
    try {
      ftruncateSync(this.#fd, 0);
      this.#bytes = 0;
      this.#torn = false;
    } catch (err) {
      this.#compactRetryAt = this.#now() + COMPACT_RETRY_MS;
      this.#log.error({ err, path: this.#path }, 'settlement spool compaction failed; appending to the file as it is');
    }
  }

  /**
   * The pending lines alone in a new file that takes the path. Written aside then renamed: a kill at
   * any point leaves either the old file or the new one whole. When the disk refuses, the current
   * file is kept.
   */
  #rewrite(): void {
    const tmp = `${this.#path}.tmp`;
    let fd = -1;
    try {
      let text = '';
      for (const e of this.#pending.values()) text += e.line;
      fd = openSync(tmp, REWRITE_FLAGS);
      const bytes = writeAll(fd, text);
      renameSync(tmp, this.#path);
      const old = this.#fd;
      this.#fd = fd;
      fd = -1;
      this.#bytes = bytes;
      this.#torn = false;
      // Every pending line is in the new file, the lines of this turn too; done ones need no line.
      this.#unwritten = '';
      this.#doneLines = '';
      closeQuietly(old);
    } catch (err) {
      if (fd >= 0) {
        closeQuietly(fd);
        try {
          unlinkSync(tmp);
        } catch {
          // Left for the next rewrite, which empties it.
        }
      }
      this.#compactRetryAt = this.#now() + COMPACT_RETRY_MS;
      this.#log.error({ err, path: this.#path }, 'settlement spool compaction failed; appending to the file as it is');
    }
  }

  /** Whether this spool's file is no longer at its path: another relay took it for a dead relay's. */
  #taken(): boolean {
    const own = fstatSync(this.#fd);
    if (own.nlink === 0) return true;
    try {
      const at = statSync(this.#path);
      return at.ino !== own.ino || at.dev !== own.dev;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'ENOENT';
    }
  }

  /**
   * The relay that took the file replays what it read there; what this one wrote since went into a
   * file no relay will read, so a kill from here on would lose it. The pending settlements go to a
   * new file at the path; one that both relays replay is settled once (the script is idempotent).
   */
  #reclaim(): void {
    this.#log.warn({ path: this.#path, pending: this.#pending.size }, 'settlement spool: its file was taken over by another relay; pending settlements rewritten to a new file');
    // A refusal was logged; the next touch finds the file gone again and tries again.
    this.#rewrite();
  }

  /** Takes over the files of relays no longer running: their pending settlements become this spool's. */
  #adoptOrphans(): void {
    const orphans: { path: string; mtime: number }[] = [];
    const look = ++this.#look;
    for (const name of readdirSync(this.#dir)) {
      const m = FILE_PATTERN.exec(name);
      const path = join(this.#dir, name);
      if (!m || openHere.has(path)) continue;
      // Another database's settlements settle only in its own gateway's Redis.
      if (m[1] !== undefined && this.#database !== undefined && m[1] !== this.#database) continue;
      if (!this.#isOrphan(path, m[2], Number(m[3]), look)) continue;
      this.#sightings.delete(path);
      // Renamed first, so that two relays starting together never both replay one file.
      const claimed = join(this.#dir, `${this.#prefix}${randomBytes(4).toString('hex')}.claimed`);
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
    for (const [path, seen] of this.#sightings) if (seen.look !== look) this.#sightings.delete(path);
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

  /**
   * Whether the file of relay `pid` on host `host` (undefined: a relay from before the host part,
   * taken as this host's) is a dead relay's. Another host's is judged by what this relay saw: its
   * mtime is that host's clock, which may be any distance from this one's. A file first seen now is
   * never taken at once, so a relay started after a crash takes a dead relay's file one staleness
   * period after it started.
   */
  #isOrphan(path: string, host: string | undefined, pid: number, look: number): boolean {
    if (host === undefined || host === HOST) return !isRunning(pid);
    let st;
    try {
      st = statSync(path);
    } catch {
      // Gone meanwhile (its relay closed it, or another took it over).
      return false;
    }
    const now = this.#now();
    const seen = this.#sightings.get(path);
    if (seen === undefined || seen.mtimeMs !== st.mtimeMs || seen.size !== st.size || seen.ino !== st.ino) {
      this.#sightings.set(path, { mtimeMs: st.mtimeMs, size: st.size, ino: st.ino, since: now, look });
      return false;
    }
    seen.look = look;
    return now - seen.since >= FOREIGN_STALE_MS;
  }
}

/**
 * Writes all of `text`, its bytes returned: write(2) may take only part of it (a disk filling up, a
 * signal), and a line cut short is unreadable.
 */
function writeAll(fd: number, text: string): number {
  const n = writeSync(fd, text);
  const total = Buffer.byteLength(text);
  if (n === total) return n;
  const bytes = Buffer.from(text);
  for (let at = n; at < total;) {
    const more = writeSync(fd, bytes, at, total - at);
    // Never on a regular file; a loop without end if it were.
    if (more <= 0) throw new Error(`settlement spool: write took ${at} of ${total} bytes`);
    at += more;
  }
  return total;
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Its data is written or was never to be: nothing to do about a failed close.
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
