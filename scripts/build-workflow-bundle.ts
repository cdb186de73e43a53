/** Writes the workflow bundle once (for images): `tsx scripts/build-workflow-bundle.ts <out.js>`; the worker loads it via WORKFLOW_BUNDLE_PATH. */
import fs from 'node:fs';
import { bundleWorkflowCode } from '@temporalio/worker';

async function main(): Promise<void> {
  const out = process.argv[2] ?? 'dist/workflow-bundle.js';
  const { code } = await bundleWorkflowCode({ workflowsPath: require.resolve('../workflows') });
  fs.writeFileSync(out, code);
  console.log(`workflow bundle written to ${out} (${(code.length / 1024).toFixed(0)} KiB)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
