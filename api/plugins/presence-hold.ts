/**
 * The heartbeat's hold on the presence clock (store/federation/presence-recorder.ts, PresenceRecorder.hold). A route
 * that declares `config: { presenceHold: true }` (POST /a2a/heartbeat) holds this process's presence clock at the
 * request's arrival from its first hook, before authentication, until the request is answered or its connection
 * closes; the handler records the heartbeat as seen at its arrival. So a heartbeat that waits in authentication (the
 * node cache reading its node after a restart) cannot be judged late by the sweeper, and its node is seen when it
 * spoke, not when the hub got round to it.
 *
 * Authentication is the hub's own work; the body is the client's: once credentials are checked (preParsing) the
 * hold lasts at most BODY_HOLD_MS more, so an authenticated client trickling its body cannot stall every node's
 * offline judgement (its heartbeat then counts as seen when it is recorded). No hold lasts more than 10 s
 * (PRESENCE_HOLD_MAX_MS), whatever authentication takes.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { PresenceHold, PresenceRecorder } from '../../store/federation/presence-recorder';
import { header } from './auth/principal';

/** How long a heartbeat's body may take to arrive and parse while it still holds the presence clock. */
export const BODY_HOLD_MS = 1000;

declare module 'fastify' {
  interface FastifyContextConfig {
    presenceHold?: boolean;
  }
  interface FastifyRequest {
    presenceHold: PresenceHold | null;
  }
}

function presenceHoldPlugin(app: FastifyInstance, opts: { recorder: PresenceRecorder }): void {
  app.decorateRequest('presenceHold', null);
  app.addHook('onRequest', async (request, reply) => {
    // A request without both credentials is answered 401 at once: nothing to hold for.
    if (
      !request.routeOptions.config.presenceHold ||
      !header(request, 'x-external-node') ||
      !header(request, 'x-external-key')
    )
      return;
    const hold = opts.recorder.hold(Date.now());
    request.presenceHold = hold;
    reply.raw.once('close', hold.release);
  });
  app.addHook('preParsing', async (request) => {
    request.presenceHold?.limit(BODY_HOLD_MS);
  });
}

export default fp(presenceHoldPlugin, { name: 'presence-hold' });
