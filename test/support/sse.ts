/** Reading a server-sent event stream in tests. */

/** An SSE response's data events, parsed, until the server ends the stream. */
export async function sseEvents(res: Response, onEvent?: (event: any) => Promise<void>): Promise<any[]> {
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: any[] = [];
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      if (!data) continue;
      const event = JSON.parse(data);
      events.push(event);
      await onEvent?.(event);
    }
  }
  return events;
}
