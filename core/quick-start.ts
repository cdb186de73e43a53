/**
 * The five quick-start steps of the federation (in the order of docs/federation.md), shown by the endpoint summary
 * and the join page.
 */
export function quickStartSteps(
  base: string,
  offlineAfterS: number
): { step1: string; step2: string; step3: string; step4: string; step5: string } {
  return {
    step1: `Discover the agent: GET ${base}/a2a/.well-known/agent.json`,
    step2: `Register anonymously: POST ${base}/a2a/register with {"name", "brand": {"code", "model_base"}}; keep the api_key it returns`,
    step3: `Fetch the endpoint directory: GET ${base}/a2a/endpoints`,
    step4: `Send a heartbeat: POST ${base}/a2a/heartbeat with headers X-External-Node and X-External-Key, at least every ${offlineAfterS} s`,
    step5: 'Call the endpoints you need, with the auth model each one declares'
  };
}
