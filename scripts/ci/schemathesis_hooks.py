"""Schemathesis hooks for scripts/ci/schemathesis.ts: generated requests obey the service's rules that OpenAPI
cannot state, so every check stays on for those operations. Each rule below says what it is and why.

Schemathesis re-validates a case after these hooks, so a case that becomes schema-valid is judged as positive.
"""

import os
import re

import schemathesis

# I-JSON (RFC 7493 §2.2): the JSON body parser refuses integers a double cannot carry exactly (number_out_of_range)
# anywhere in a body, including free-form values (truth values, task payloads, extra members). JSON Schema can bound
# a declared number, not every number inside an arbitrary value.
MAX_SAFE_INTEGER = 2**53 - 1


def _i_json(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        return MAX_SAFE_INTEGER if value > 0 else -MAX_SAFE_INTEGER
    if isinstance(value, list):
        return [_i_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _i_json(v) for k, v in value.items()}
    return value


@schemathesis.hook
def map_body(context, body):
    return _i_json(body)


def _well_formed_did(value):
    return isinstance(value, str) and len(value) <= 256 and re.fullmatch(r'did:[a-z0-9]+:[A-Za-z0-9._:%-]+', value) is not None


def _ints(container, *names):
    values = [container.get(n) if container else None for n in names]
    return values if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else None


@schemathesis.hook
def map_case(context, case):
    path = case.operation.path
    query = case.query if isinstance(case.query, dict) else None
    body = case.body if isinstance(case.body, dict) else None
    # GET /api/proof/consistency: first <= second, a rule between two parameters.
    if path == '/api/proof/consistency' and _ints(query, 'first', 'second'):
        first, second = _ints(query, 'first', 'second')
        if first > second:
            query['first'], query['second'] = second, first
    # GET /api/proof/inclusion: seq <= tree_size, the same kind of rule.
    if path == '/api/proof/inclusion' and _ints(query, 'seq', 'tree_size'):
        seq, size = _ints(query, 'seq', 'tree_size')
        if seq > size:
            query['seq'], query['tree_size'] = size, seq
    # POST /api/report/truth: a `did` in the body must equal the X-DID header (a rule between body and header).
    if path == '/api/report/truth' and body is not None and isinstance(body.get('did'), str):
        body['did'] = os.environ['ZH_SCHEMATHESIS_DID']
    # POST /admin/homologous-tokens: a well-formed `did` must also name a registered DID (state the document cannot
    # know). A malformed one is left alone: that case is meant to be refused.
    if path == '/admin/homologous-tokens' and body is not None and _well_formed_did(body.get('did')):
        body['did'] = os.environ['ZH_SCHEMATHESIS_DID']
    # POST /a2a/directory-tree/merge: a rejection must give a reason (a rule between two members).
    if path == '/a2a/directory-tree/merge' and body is not None and body.get('decision') == 'reject':
        reason = body.get('reason', '')
        if isinstance(reason, str) and not reason.strip():
            body['reason'] = 'rejected by the fuzzer'
    return case
