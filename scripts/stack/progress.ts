/**
 * Live status lines on stderr for the slow steps of a start (the first build of the embedded servers).
 *   - On a terminal: a block of lines at the bottom, one per task, redrawn in place every second; every other line
 *     the launcher prints goes through printLine(), which clears the block, prints the line above it and redraws it,
 *     so log lines and status lines never overwrite each other.
 *   - Not a terminal (CI logs, pipes, files): no cursor movement; each task's current line is printed every
 *     PROGRESS_INTERVAL_MS instead, so a log stays readable and still shows that something is happening.
 */

/** How often a status line is printed when stderr is not a terminal (ZH_PROGRESS_INTERVAL_MS: tests print faster). */
export const PROGRESS_INTERVAL_MS = Number(process.env.ZH_PROGRESS_INTERVAL_MS) || 10_000;
/** How often the block is redrawn on a terminal (the elapsed time moves). */
const REDRAW_MS = 1_000;

export interface StatusLine {
  /** Replaces the task's line (redrawn on a terminal at the next tick, printed on the next interval otherwise). */
  update(text: string): void;
  /** Removes the task's line; `finalText`, if given, is printed once as an ordinary line. */
  done(finalText?: string): void;
}

class StatusBoard {
  private readonly lines = new Map<number, string>();
  private nextId = 0;
  private drawn = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly out: NodeJS.WriteStream) {}

  private get live(): boolean {
    return Boolean(this.out.isTTY) && process.env.TERM !== 'dumb';
  }

  add(text: string): StatusLine {
    const id = this.nextId++;
    this.lines.set(id, text);
    this.schedule();
    if (this.live) this.redraw();
    return {
      update: (next) => {
        if (this.lines.has(id)) this.lines.set(id, next);
      },
      done: (finalText) => {
        if (!this.lines.delete(id)) return;
        if (finalText !== undefined) this.print(this.out, `${finalText}\n`);
        else if (this.live) this.redraw();
        if (this.lines.size === 0) this.unschedule();
      }
    };
  }

  /** Writes `text` (whole lines) to `stream` without breaking the status block. */
  print(stream: NodeJS.WritableStream, text: string): void {
    if (!this.live || this.drawn === 0) {
      stream.write(text);
      if (this.live && this.lines.size > 0) this.redraw();
      return;
    }
    this.clear();
    stream.write(text);
    this.redraw();
  }

  private clear(): void {
    if (this.drawn > 0) this.out.write(`\x1b[${this.drawn}A\r\x1b[J`);
    this.drawn = 0;
  }

  private redraw(): void {
    this.clear();
    // Lines longer than the terminal would wrap and break the count of lines to move up over.
    const width = Math.max(20, (this.out.columns || 100) - 1);
    const text = [...this.lines.values()].map((l) => (l.length > width ? `${l.slice(0, width - 1)}…` : l));
    if (text.length > 0) this.out.write(`${text.join('\n')}\n`);
    this.drawn = text.length;
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = this.live
      ? setInterval(() => this.redraw(), REDRAW_MS)
      : setInterval(() => {
          for (const line of this.lines.values()) this.out.write(`${line}\n`);
        }, PROGRESS_INTERVAL_MS);
    // Status lines never keep the process alive by themselves.
    this.timer.unref();
  }

  private unschedule(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.live) this.redraw();
  }
}

const board = new StatusBoard(process.stderr);

/** A new status line (see the module comment for how it is shown). */
export function statusLine(text: string): StatusLine {
  return board.add(text);
}

/** Prints whole lines to stdout or stderr around the status block. */
export function printLine(stream: NodeJS.WritableStream, text: string): void {
  board.print(stream, text.endsWith('\n') ? text : `${text}\n`);
}

/** 75 s → "1:15". */
export function minutes(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}
