/**
 * The admission gate's refusals reach the log as one warning per interval with their count, not one line each:
 * a flood of refusals (thousands a second under overload) must not add a logged stack trace apiece to the load it
 * sheds. (What the refused callers see, 503 overloaded at once, is in test/api/truth-overload.test.ts.)
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { AdmissionGate } from '../../api/plugins/admission';

it('logs the refusals of each 10 s as one warning with their count', () => {
  jest.useFakeTimers();
  try {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), done()) }));
    const gate = new AdmissionGate('truth_write', 2);
    const places = [gate.tryEnter(), gate.tryEnter()];
    expect(places.every((p) => p !== null)).toBe(true);
    const refuse = (n: number) => {
      for (let i = 0; i < n; i++) {
        expect(gate.tryEnter()).toBeNull();
        gate.logRefusals(log);
      }
    };
    refuse(500);
    expect(lines).toEqual([]);
    jest.advanceTimersByTime(10_000);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, gate: 'truth_write', limit: 2, refused: 500, refused_total: 500 });
    // The next refusals open the next interval; a place given back admits again.
    refuse(3);
    places[0]!();
    expect(gate.tryEnter()).not.toBeNull();
    jest.advanceTimersByTime(10_000);
    expect(lines.map((l) => l.refused)).toEqual([500, 3]);
    expect(lines[1]).toMatchObject({ refused_total: 503 });
    jest.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(2);
  } finally {
    jest.useRealTimers();
  }
});
