/** The OpenAPI 3 document (/openapi.json) generated from the routes' zod schemas, and a docs UI at /docs. */
import { FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { FEDERATION_API_VERSION, SERVICE_NAME } from '../core/version';

export async function registerOpenApi(app: FastifyInstance, publicUrl: string): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      info: { title: SERVICE_NAME, version: FEDERATION_API_VERSION, description: 'Federation hub for AI agent nodes. Errors: { ok: false, error, message, trace_id }.' },
      servers: [{ url: publicUrl }],
      components: {
        securitySchemes: {
          external_node: { type: 'apiKey', in: 'header', name: 'X-External-Key' },
          homologous: { type: 'apiKey', in: 'header', name: 'X-ZR-Token' },
          did: { type: 'apiKey', in: 'header', name: 'X-DID' },
          bearer: { type: 'http', scheme: 'bearer' }
        }
      }
    },
    transform: jsonSchemaTransform
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () => app.swagger());
}
