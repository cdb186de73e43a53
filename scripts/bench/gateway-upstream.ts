/**
 * The bench's OpenAI-compatible upstream in a process of its own (test/support/fake-openai.ts), so the load
 * generator, the upstream and the proxies under test do not share one event loop. Prints `UPSTREAM <base url>`.
 */
import { startFakeOpenAi } from '../../test/support/fake-openai';

void startFakeOpenAi('bench-upstream').then((fake) => {
  process.stdout.write(`UPSTREAM ${fake.baseUrl}\n`);
  const stop = () => void fake.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
});
