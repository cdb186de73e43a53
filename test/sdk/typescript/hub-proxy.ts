/**
 * A small HTTP proxy in front of a test hub, for the SDK's tests: it forwards every request and can answer some
 * itself (429 or 503 with Retry-After, as a busy hub would) or change the hub's answer (flip one byte of an
 * inclusion proof or of the checkpoint's signature, as a forging hub or a man in the middle would; add a witness's
 * cosignature line, honest or forged, to the checkpoint). It records when
 * each request arrived, so a test can see how long the client waited.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Refusal {
  status: number;
  retryAfterS: number;
  /** How many requests to refuse. */
  times: number;
}

export class HubProxy {
  readonly arrivals: { path: string; at: number }[] = [];
  /** Refuse requests whose path starts with the key. */
  readonly refuse = new Map<string, Refusal>();
  tamperProof = false;
  tamperCheckpoint = false;
  /** Lines (each ending in a newline) to append to the checkpoint's signatures, given the note's text (a witness's). */
  cosign: ((noteText: string) => string) | null = null;
  private server!: http.Server;
  url = '';

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      void this.handle(req, res).catch(() => {
        res.statusCode = 502;
        res.end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  count(prefix: string): number {
    return this.arrivals.filter((a) => a.path.startsWith(prefix)).length;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = req.url ?? '/';
    this.arrivals.push({ path, at: Date.now() });
    for (const [prefix, refusal] of this.refuse) {
      if (!path.startsWith(prefix) || refusal.times <= 0) continue;
      refusal.times--;
      res.writeHead(refusal.status, { 'content-type': 'application/json', 'retry-after': String(refusal.retryAfterS) });
      res.end(
        JSON.stringify({ ok: false, error: refusal.status === 429 ? 'rate_limited' : 'unavailable', message: 'proxy' })
      );
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host') headers[k] = v;
    const upstream = await fetch(`${this.target}${path}`, {
      method: req.method,
      headers,
      body: chunks.length ? Buffer.concat(chunks) : undefined
    });
    let body = Buffer.from(await upstream.arrayBuffer());
    if (this.tamperProof && path.startsWith('/api/proof/inclusion') && upstream.status === 200) {
      // Flip one hex digit of the first audit path hash (0 <-> 1 keeps it valid hex).
      const text = body.toString('utf8');
      const at = text.indexOf('"audit_path":["') + '"audit_path":["'.length;
      body = Buffer.from(text.slice(0, at) + (text[at] === '0' ? '1' : '0') + text.slice(at + 1), 'utf8');
    }
    if (this.tamperCheckpoint && path.startsWith('/tlog/checkpoint') && upstream.status === 200) {
      // One byte of the signature: the 10th base64 character of the signature line.
      const text = body.toString('utf8');
      const at = text.lastIndexOf(' ') + 10;
      body = Buffer.from(text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1), 'utf8');
    }
    if (this.cosign && path.startsWith('/tlog/checkpoint') && upstream.status === 200) {
      const text = body.toString('utf8');
      body = Buffer.from(text + this.cosign(text.slice(0, text.indexOf('\n\n') + 1)), 'utf8');
    }
    const out: Record<string, string> = {};
    upstream.headers.forEach((v, k) => {
      if (k !== 'content-length' && k !== 'content-encoding' && k !== 'transfer-encoding' && k !== 'connection')
        out[k] = v;
    });
    res.writeHead(upstream.status, out);
    res.end(body);
  }
}
