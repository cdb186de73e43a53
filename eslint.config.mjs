// The linter keeps three promises: no promise is left floating anywhere, workflow code stays deterministic, and
// nothing below the workflows imports them (import circles are refused by scripts/ci/check-import-cycles.ts).
// Workflow files and their contracts (contracts/: ids, signals, queries, updates, inputs) run in Temporal's sandbox:
// they may import the SDK's workflow API, pure modules of core/ and contracts/, and types (only) from activities/;
// never Node built-ins, I/O libraries, store/, api/ or anything that reaches them. core/ is pure except files named
// *.node.ts (hashing, keys, configuration), which workflows never import. Client modules beside the workflows
// (*.client.ts, client-support.ts) run in the API and are exempt.
// Layers: api/ -> services/ -> workflows/ (clients) -> contracts/ <- activities/ -> store/ -> core/. activities/,
// store/, core/ and contracts/ import nothing of workflows/ but types.
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

/** Imports that reach I/O or Node-only code. */
const ioPaths = (allowTypeImports) => [
  { group: ['**/store', '**/store/**'], message: 'store/ does I/O: call it from an activity', allowTypeImports },
  { group: ['**/api', '**/api/**'], message: 'api/ is the HTTP layer', allowTypeImports },
  { group: ['**/worker', '**/worker/**'], message: 'worker/ builds the worker process', allowTypeImports },
  {
    group: ['**/*.node', '**/*.node.ts'],
    message: 'Node-only module (*.node.ts): not in the workflow sandbox',
    allowTypeImports
  },
  {
    group: ['**/*.client', '**/client-support'],
    message: 'client modules run in the API, not in workflows',
    allowTypeImports
  }
];

/** The layers under the workflows import their contracts, never the workflows. */
const notWorkflows = {
  group: ['**/workflows', '**/workflows/**'],
  message: "import the flow's contract from contracts/, not workflows/",
  allowTypeImports: true
};

const ioLibraries = [
  'mongodb',
  'openai',
  'fastify',
  'fastify-plugin',
  'fastify-type-provider-zod',
  '@fastify/swagger',
  '@fastify/swagger-ui',
  '@fastify/rate-limit',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/activity',
  '@temporalio/testing',
  'pino',
  'jose',
  'find-my-way'
];

/** What the workflow sandbox may not import, plus any further patterns. */
const sandboxImports = (extraPatterns) => [
  'error',
  {
    paths: [...nodeBuiltins, ...ioLibraries].map((name) => ({
      name,
      message: 'not allowed in the workflow sandbox (workflows must be deterministic and do no I/O)'
    })),
    patterns: [
      // Types (a stored document's shape) are fine: they vanish at compile time.
      ...ioPaths(true),
      {
        group: ['**/activities', '**/activities/**'],
        message: 'workflows import activities as types only (proxyActivities)',
        allowTypeImports: true
      },
      { group: ['node:*'], message: 'Node built-ins are not allowed in the workflow sandbox' },
      ...extraPatterns
    ]
  }
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      'coverage/**',
      '.data/**',
      '.test-results/**',
      '.schemathesis/**',
      '**/*.js',
      '**/*.mjs',
      '**/*.cjs'
    ]
  },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname }
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }]
    }
  },
  {
    // The layers under the workflows never reach up into them (contracts/ is where shared ids and types live).
    // core/ and contracts/ get the same pattern in their own blocks below (a later block's rule replaces this one).
    files: ['activities/**/*.ts', 'store/**/*.ts', 'core/**/*.node.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [notWorkflows] }] }
  },
  {
    // Workflow code (not the client modules beside it).
    files: ['workflows/**/*.ts'],
    ignores: ['workflows/**/*.client.ts', 'workflows/client-support.ts'],
    rules: { 'no-restricted-imports': sandboxImports([]) }
  },
  {
    // Contracts are imported by workflows, so they live by the sandbox's rules, and never import a workflow.
    files: ['contracts/**/*.ts'],
    rules: { 'no-restricted-imports': sandboxImports([notWorkflows]) }
  },
  {
    // Pure core modules: what workflows may import.
    files: ['core/**/*.ts'],
    ignores: ['core/**/*.node.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [...nodeBuiltins, ...ioLibraries].map((name) => ({
            name,
            message: 'core/ is pure (no Node built-ins, no I/O): put Node-only code in a *.node.ts file'
          })),
          patterns: [
            ...ioPaths(false),
            notWorkflows,
            { group: ['**/activities', '**/activities/**'], message: 'core/ is pure' },
            { group: ['node:*'], message: 'core/ is pure: put Node-only code in a *.node.ts file' }
          ]
        }
      ]
    }
  }
);
