/**
 * The OpenAPI 3 document (/openapi.json) generated from the routes' zod schemas, and a docs UI at /docs.
 * Every operation's `security` and error responses come from api/response-docs.ts (derived from config.auth and
 * the route's inputs); `.ci/run` fuzzes the document against a running service with schemathesis
 * (scripts/ci/schemathesis.ts), so what it says is what the service does.
 */
import { FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { FEDERATION_API_VERSION, SERVICE_NAME } from '../core/version';
import { securitySchemes } from './response-docs';

type RouteDocument = Parameters<typeof jsonSchemaTransform>[0];

export async function registerOpenApi(app: FastifyInstance, publicUrl: string): Promise<void> {
  // @fastify/swagger marks every request body required; a route whose schema accepts no body (the heartbeat) is
  // noted here while its schema is transformed, and its requestBody made optional in the finished document.
  const optionalBodies = new Set<string>();
  const transform = (document: RouteDocument) => {
    const body = (document.schema as { body?: unknown } | undefined)?.body;
    if (body instanceof z.ZodType && body.safeParse(undefined).success) {
      for (const method of [document.route.method].flat())
        optionalBodies.add(`${method.toLowerCase()} ${document.url}`);
    }
    return jsonSchemaTransform(document);
  };
  const transformObject = (documentObject: { openapiObject: Record<string, unknown> }) => {
    const paths = (documentObject.openapiObject.paths ?? {}) as Record<
      string,
      Record<string, { requestBody?: { required?: boolean } }>
    >;
    for (const [p, item] of Object.entries(paths)) {
      const url = p.replace(/\{([^}]+)\}/g, ':$1');
      for (const [method, op] of Object.entries(item))
        if (op.requestBody && optionalBodies.has(`${method} ${url}`)) op.requestBody.required = false;
    }
    return documentObject.openapiObject;
  };
  await app.register(fastifySwagger, {
    openapi: {
      info: {
        title: SERVICE_NAME,
        version: FEDERATION_API_VERSION,
        description:
          'Federation hub for AI agent nodes. Errors: { ok: false, error, message, trace_id, ...details } (the A2A binding under /a2a answers A2A errors).'
      },
      servers: [{ url: publicUrl }],
      components: { securitySchemes: securitySchemes(publicUrl) as never }
    },
    transform,
    transformObject: transformObject as never
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () => app.swagger());
}
