"""Checks a running hub's agent card with the Python A2A SDK (a2a-sdk), as a Python client would use it.

    check_agent_card.py <base url>

Resolves the card (A2ACardResolver), requires every field the A2A v1.0 schema marks REQUIRED (the SDK's own
validator: a required list must not be empty), creates a client for the advertised interface (ClientFactory) and
calls its operations: SendMessage must answer, GetTask and CancelTask must give the protocol's TaskNotFoundError
(the route answers in the binding's error shape, not a bare 404), ListTasks must answer. Prints one line per check;
exits non-zero on the first failure. Run by test/api/agent-card-a2a.test.ts when the CI venv exists.
"""

import asyncio
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.proto_utils import validate_proto_required_fields


async def main(base_url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for path in ('/.well-known/agent-card.json', '/a2a/.well-known/agent.json'):
            card = await A2ACardResolver(http, base_url, path).get_agent_card()
            try:
                validate_proto_required_fields(card)
            except InvalidParamsError as e:
                raise SystemExit(f'fail: card at {path} misses REQUIRED fields: {e.data}') from e
            print(f'ok: card at {path} resolves and has every REQUIRED field ({card.name} {card.version})')
        if card.capabilities.streaming:
            raise SystemExit('fail: the card says streaming, which the hub does not serve')

        bindings = [i.protocol_binding for i in card.supported_interfaces]
        client = ClientFactory(ClientConfig(httpx_client=http, supported_protocol_bindings=bindings)).create(card)
        request = SendMessageRequest(message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text='hello')]))
        replies = [reply async for reply in client.send_message(request)]
        if len(replies) != 1 or not replies[0].HasField('message') or replies[0].message.role != Role.ROLE_AGENT:
            raise SystemExit(f'fail: SendMessage answered {replies}')
        print('ok: SendMessage answers with an agent message')

        for name, call in (('GetTask', lambda: client.get_task(GetTaskRequest(id='no-such-task'))), ('CancelTask', lambda: client.cancel_task(CancelTaskRequest(id='no-such-task')))):
            try:
                await call()
            except TaskNotFoundError:
                print(f'ok: {name} answers TaskNotFoundError')
                continue
            raise SystemExit(f'fail: {name} of an unknown task did not raise TaskNotFoundError')

        listed = await client.list_tasks(ListTasksRequest())
        print(f'ok: ListTasks answers ({len(listed.tasks)} tasks)')


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1]))
