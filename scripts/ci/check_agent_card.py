"""Checks a running hub's agent card and A2A binding with the Python A2A SDK (a2a-sdk), as a Python client would.

    A2A_HEADERS='{"X-External-Node": "...", "X-External-Key": "..."}' check_agent_card.py <base url>

Resolves the card (A2ACardResolver), requires every field the A2A v1.0 schema marks REQUIRED (the SDK's own
validator: a required list must not be empty), creates a client for each advertised interface, HTTP+JSON then JSON-RPC (ClientFactory
restricted to that binding, with the caller's credentials on its httpx client) and runs a task's life on each
(then streams a second task, SendStreamingMessage, until a cancel makes it final): SendMessage queues a task (SUBMITTED; it names
a capability no node declared, so it stays queued), GetTask and ListTasks find it, CancelTask cancels it, and an
unknown task gives the protocol's TaskNotFoundError. Prints one line per check; exits non-zero on the first failure.
Run by test/api/agent-card-a2a.test.ts when the CI venv exists.
"""

import asyncio
import json
import os
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf import struct_pb2


async def main(base_url: str) -> None:
    headers = json.loads(os.environ.get('A2A_HEADERS', '{}'))
    async with httpx.AsyncClient(timeout=10, headers=headers) as http:
        for path in ('/.well-known/agent-card.json', '/a2a/.well-known/agent.json'):
            card = await A2ACardResolver(http, base_url, path).get_agent_card()
            try:
                validate_proto_required_fields(card)
            except InvalidParamsError as e:
                raise SystemExit(f'fail: card at {path} misses REQUIRED fields: {e.data}') from e
            print(f'ok: card at {path} resolves and has every REQUIRED field ({card.name} {card.version})')
        if not card.capabilities.streaming:
            raise SystemExit('fail: the card does not say streaming, which the hub serves')

        bindings = [i.protocol_binding for i in card.supported_interfaces]
        if bindings != ['HTTP+JSON', 'JSONRPC']:
            raise SystemExit(f'fail: the card advertises {bindings}, expected HTTP+JSON and JSONRPC')
        for binding in bindings:
            await task_life(card, http, binding)


async def task_life(card, http: httpx.AsyncClient, binding: str) -> None:
    """A task's life through one of the card's interfaces (the client is restricted to that binding)."""
    # Not streaming, and polling (returnImmediately): the task waits for a node that never comes (the JavaScript check streams).
    client = ClientFactory(ClientConfig(httpx_client=http, supported_protocol_bindings=[binding], streaming=False, polling=True)).create(card)
    metadata = struct_pb2.Struct()
    metadata.update({'required_capabilities': ['python-check-only']})
    request = SendMessageRequest(message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text='hello')], metadata=metadata))
    replies = [reply async for reply in client.send_message(request)]
    if len(replies) != 1 or not replies[0].HasField('task') or replies[0].task.status.state != TaskState.TASK_STATE_SUBMITTED:
        raise SystemExit(f'fail: SendMessage [{binding}] answered {replies}')
    task_id = replies[0].task.id
    print(f'ok: SendMessage queues a task (SUBMITTED) [{binding}]')

    got = await client.get_task(GetTaskRequest(id=task_id))
    if got.id != task_id or got.status.state != TaskState.TASK_STATE_SUBMITTED:
        raise SystemExit(f'fail: GetTask [{binding}] answered {got}')
    print(f'ok: GetTask answers the task [{binding}]')

    listed = await client.list_tasks(ListTasksRequest())
    if task_id not in [t.id for t in listed.tasks]:
        raise SystemExit(f'fail: ListTasks [{binding}] misses {task_id}: {listed}')
    print(f'ok: ListTasks answers ({len(listed.tasks)} tasks) [{binding}]')

    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    if canceled.status.state != TaskState.TASK_STATE_CANCELED:
        raise SystemExit(f'fail: CancelTask [{binding}] answered {canceled}')
    print(f'ok: CancelTask cancels it [{binding}]')

    # Streaming: the stream follows the task until it is final; a cancel from the other client ends it.
    streaming = ClientFactory(ClientConfig(httpx_client=http, supported_protocol_bindings=[binding], streaming=True)).create(card)
    request = SendMessageRequest(message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text='stream me')], metadata=metadata))
    states = []
    async for event in streaming.send_message(request):
        if event.HasField('task'):
            states.append(event.task.status.state)
            await client.cancel_task(CancelTaskRequest(id=event.task.id))
        elif event.HasField('status_update'):
            states.append(event.status_update.status.state)
    if states[:1] != [TaskState.TASK_STATE_SUBMITTED] or states[-1:] != [TaskState.TASK_STATE_CANCELED]:
        raise SystemExit(f'fail: SendStreamingMessage [{binding}] saw states {states}')
    print(f'ok: SendStreamingMessage streams the task until it is final (CANCELED) [{binding}]')

    try:
        await client.get_task(GetTaskRequest(id='no-such-task'))
    except TaskNotFoundError:
        print(f'ok: GetTask of an unknown task answers TaskNotFoundError [{binding}]')
    else:
        raise SystemExit(f'fail: GetTask [{binding}] of an unknown task did not raise TaskNotFoundError')

if __name__ == '__main__':
    asyncio.run(main(sys.argv[1]))
