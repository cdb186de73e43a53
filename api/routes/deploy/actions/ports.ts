/**
 * port_alloc { app }, port_register { app, port } and port_release { app | port }: the port pool applications
 * behind the hub's nginx listen on (store/deploy/ports.ts). The pool needs no web server.
 */
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../../../../core/errors';
import type { PortPoolStore } from '../../../../store/deploy/ports';
import type { DeployAccess } from '../access';
import { answer } from './action';

const app = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/)
  .describe('an application name (letters, digits, . _ -; at most 64)');
const anyPort = z.number().int().min(1).max(65535);
export const portAllocBody = z.object({ action: z.literal('port_alloc'), app }).strict();
export const portReleaseBody = z
  .object({ action: z.literal('port_release'), app: app.optional(), port: anyPort.optional() })
  .strict()
  .describe('exactly one of app and port')
  // What the handler enforces, stated in the document too, so a client (and the fuzzer) knows both together are refused.
  .meta({ oneOf: [{ required: ['app'] }, { required: ['port'] }] });
export const portRegisterBody = z.object({ action: z.literal('port_register'), app, port: anyPort }).strict();
export const portAnswer = z.object({
  ok: z.literal(true),
  action: z.enum(['port_alloc', 'port_release', 'port_register']),
  app: z.string(),
  port: z.number().int(),
  existing: z.boolean().describe('port_alloc/port_register: the app already held this port')
});

export function createPortActions(deps: { ports: PortPoolStore; access: DeployAccess }) {
  const { ports, access } = deps;
  return {
    port_alloc: async (body: z.infer<typeof portAllocBody>, request: FastifyRequest) => {
      await access.allow(request, 'deploy');
      return answer(200, { ok: true as const, action: body.action, ...(await ports.allocate(body.app)) });
    },
    port_register: async (body: z.infer<typeof portRegisterBody>, request: FastifyRequest) => {
      await access.allow(request, 'deploy');
      return answer(200, { ok: true as const, action: body.action, ...(await ports.register(body.app, body.port)) });
    },
    port_release: async (body: z.infer<typeof portReleaseBody>, request: FastifyRequest) => {
      await access.allow(request, 'deploy');
      if ((body.app === undefined) === (body.port === undefined)) {
        throw new AppError('invalid_request', 'port_release takes exactly one of app and port', {
          fields: [{ field: 'body', message: 'exactly one of app and port' }]
        });
      }
      const released = await ports.release(body.app !== undefined ? { app: body.app } : { port: body.port! });
      if (!released)
        throw new AppError(
          'not_found',
          `no port is held by ${body.app !== undefined ? `app ${body.app}` : `port ${body.port}`}`
        );
      return answer(200, {
        ok: true as const,
        action: body.action,
        app: released.app,
        port: released._id,
        existing: true
      });
    }
  };
}
