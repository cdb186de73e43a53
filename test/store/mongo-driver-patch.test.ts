/**
 * The MongoDB driver patch (patches/mongodb+7.8.0.patch, docs/storage.md#dependency-patches): a command on a connection
 * whose socket closes before or while the command is written must fail with a network error. Unpatched, the
 * write waits for a 'drain' that a destroyed socket never emits: the server monitor's check hung that way when
 * the database restarted, and the process never saw the database again. Driven against a loopback TCP peer.
 */
import net from 'node:net';
import { once } from 'node:events';
import { MongoNetworkError } from 'mongodb';
// The driver's connection class is internal; this test pins the behaviour the patch adds to it.
const { Connection } = require('mongodb/lib/cmap/connection');

let server: net.Server;
let peers: net.Socket[] = [];

beforeAll(async () => {
  server = net.createServer((socket) => peers.push(socket.on('error', () => undefined)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
});
afterEach(() => {
  for (const p of peers) p.destroy();
  peers = [];
});
afterAll(() => new Promise((r) => server.close(r)));

async function openConnection() {
  const { port } = server.address() as net.AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  while (peers.length === 0) await new Promise((r) => setImmediate(r));
  return { connection: new Connection(socket, { id: 1, generation: 0 }), socket, peer: peers[0]! };
}

/** Settles how a command ends: its error, or 'hung' if it neither resolves nor rejects. */
async function outcome(command: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise((r) => (timer = setTimeout(() => r('hung'), 5000)));
  try {
    return await Promise.race([
      command.then(
        () => 'answered',
        (err) => err
      ),
      hung
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const ping = (connection: any) =>
  connection.command({ db: 'admin', collection: '$cmd', toString: () => 'admin.$cmd' }, { ping: 1 }, {});

it('fails a command whose socket is destroyed as it is written', async () => {
  const { connection, socket } = await openConnection();
  const command = ping(connection);
  socket.destroy();
  const result = await outcome(command);
  expect(result).toBeInstanceOf(MongoNetworkError);
});

it('fails a command whose write waits for drain when the socket closes', async () => {
  const { connection, socket } = await openConnection();
  // Fill the socket's buffer (the peer reads nothing) so the next write has to wait for 'drain'.
  while (socket.write(Buffer.alloc(1 << 20))) await new Promise((r) => setImmediate(r));
  const command = ping(connection);
  await new Promise((r) => setTimeout(r, 50));
  socket.destroy();
  const result = await outcome(command);
  expect(result).toBeInstanceOf(MongoNetworkError);
});

it('reports a write to a socket the peer has ended as a network error, not a raw EPIPE', async () => {
  const { connection, socket, peer } = await openConnection();
  const ended = once(socket, 'end');
  peer.end();
  await ended;
  const result = await outcome(ping(connection));
  expect(result).toBeInstanceOf(MongoNetworkError);
});
