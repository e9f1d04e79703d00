// Socket test helpers: the contract's ack shapes, and sockets closed after every test whatever happened.
import { expect } from 'chai';
import type { ClientSocket } from './sockets.js';

export interface AckBody<T = any> {
  success: boolean;
  data?: T;
  error?: { code: string; message: string; details: { field?: string; message: string; in?: string }[] };
}

/** Asserts `{ success: true, data }` and returns `data`. */
export function ackData(ack: AckBody): any {
  expect(ack.success, JSON.stringify(ack)).to.equal(true);
  expect(ack).to.have.all.keys('success', 'data');
  return ack.data;
}

/** Asserts `{ success: false, error: { code, message, details } }` with the given code. */
export function expectAckError(ack: AckBody, code: string): void {
  expect(ack.success, JSON.stringify(ack)).to.equal(false);
  expect(ack).to.have.all.keys('success', 'error');
  expect(ack.error).to.have.all.keys('code', 'message', 'details');
  expect(ack.error!.details).to.be.an('array');
  expect(ack.error!.code, JSON.stringify(ack)).to.equal(code);
  expect(ack.error!.message).to.be.a('string').and.not.equal('');
}

/**
 * Registers an afterEach hook (call it inside a describe) that closes every socket passed to the returned
 * function, so a failing assertion never leaves a socket open.
 */
export function closeAfterEach(): <S extends ClientSocket>(socket: S) => S {
  const open: ClientSocket[] = [];
  afterEach(() => {
    for (const socket of open.splice(0)) socket.close();
  });
  return (socket) => {
    open.push(socket);
    return socket;
  };
}
