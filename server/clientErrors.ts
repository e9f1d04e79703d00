// Requests Node's HTTP parser refuses before the app sees them (a URL or headers past the 16 KB limit, a malformed
// request line) still get the contract's error body, not Node's bare status line with an empty body.
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';

interface ParserError extends Error {
  code?: string;
}

function answer(status: number, code: string, message: string): string {
  const body = JSON.stringify({ success: false, message, error: { code, details: [] }, requestId: randomUUID() });
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/** The `clientError` listener of the HTTP server. */
export function answerClientError(err: ParserError, socket: Duplex): void {
  // A connection reset or a socket already answered has no one to tell; a request timing out keeps Node's 408.
  if (err.code === 'ECONNRESET' || !socket.writable || (socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    socket.end(answer(408, 'validation_failed', 'The request did not arrive in time'));
    return;
  }
  socket.end(
    err.code === 'HPE_HEADER_OVERFLOW'
      ? answer(431, 'payload_too_large', 'The URL and headers together may be at most 16 KB')
      : answer(400, 'validation_failed', 'The request is not well-formed HTTP'),
  );
}
