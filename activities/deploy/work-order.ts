/**
 * The work-order/<instruction_id> workflow's activity (workflows/deploy/work-order.ts), on the core task queue
 * (MongoDB only): an approved order into its node's instruction queue.
 */
import type { WorkOrderStore } from '../../store/deploy/work-orders';

export function createWorkOrderActivities(deps: { orders: WorkOrderStore }) {
  return {
    async queueWorkOrder(input: {
      instruction_id: string;
      node_id: string;
      key: string;
      value_json: string;
      approval_id: string;
      pushed_by: string;
    }): Promise<{ created_at: string }> {
      const { instruction_id, ...rest } = input;
      const order = await deps.orders.insert({ _id: instruction_id, ...rest });
      return { created_at: order.created_at };
    }
  };
}
