"""Schemathesis hooks for scripts/ci/schemathesis.ts: generated requests obey the service's rules that OpenAPI
cannot state, so every check stays on for those operations. Each rule below says what it is and why.

Schemathesis re-validates a case after these hooks, so a case that becomes schema-valid is judged as positive.
"""

import base64
import hashlib
import json
import os
import re
import secrets
import time
from urllib.parse import quote, unquote

import schemathesis
from hypothesis.internal import lambda_sources
from schemathesis.core.parameters import ParameterLocation

# A tool defect, not a finding: Hypothesis describes the filter lambdas schemathesis builds by parsing their source with
# `ast`, and on CPython 3.11 before 3.11.8 (this machine's 3.11.7; CPython gh-106905) that parse can raise
# "SystemError: AST constructor recursion depth mismatch", which aborts the operation being generated as a runtime
# error. The description is only a label, so an unparseable one becomes Hypothesis's own "unknown" label.
_describe_lambda = lambda_sources._lambda_description


def _describe_lambda_or_unknown(f, *args, **kwargs):
    try:
        return _describe_lambda(f, *args, **kwargs)
    except SystemError:
        return "lambda: <unknown>"


lambda_sources._lambda_description = _describe_lambda_or_unknown

# The JSON body parser (core/strict-json.ts) refuses, anywhere in a body, including free-form values (truth values,
# task payloads, extra members): integers a double cannot carry exactly (I-JSON, RFC 7493 §2.2; number_out_of_range),
# whether written as integers or as floats whose value is one (3.6e16 would be served back as 36000000000000000),
# up to 1e21, from where they are written with an exponent; and prototype poisoning (a `__proto__` member, a `constructor` member holding `prototype`). JSON Schema can bound a
# declared member, not every member inside an arbitrary value. Likewise Unicode noncharacters in any string or member
# name (I-JSON, RFC 7493 §2.1; `noncharacter`): an ECMA-262 pattern cannot exclude the astral ones (U+1FFFE …), so
# each one generated is replaced by a letter.
MAX_SAFE_INTEGER = 2**53 - 1


def _no_noncharacters(text):
    return ''.join('a' if 0xFDD0 <= ord(c) <= 0xFDEF or (ord(c) & 0xFFFE) == 0xFFFE else c for c in text)


def _i_json(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _no_noncharacters(value)
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        return MAX_SAFE_INTEGER if value > 0 else -MAX_SAFE_INTEGER
    if isinstance(value, float) and value.is_integer() and MAX_SAFE_INTEGER < abs(value) < 1e21:
        return float(MAX_SAFE_INTEGER if value > 0 else -MAX_SAFE_INTEGER)
    if isinstance(value, list):
        return [_i_json(v) for v in value]
    if isinstance(value, dict):
        kept = {_no_noncharacters(k): _i_json(v) for k, v in value.items() if k != '__proto__'}
        if isinstance(kept.get('constructor'), dict):
            kept['constructor'].pop('prototype', None)
        return kept
    return value


@schemathesis.hook
def map_body(context, body):
    return _i_json(body)


def _well_formed_did(value):
    return isinstance(value, str) and len(value) <= 256 and re.fullmatch(r'did:[a-z0-9]+:[A-Za-z0-9._:%-]+', value) is not None


def _as_int(value):
    """An integer, also from the string form the coverage phase sends query values in; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r'-?[0-9]+', value):
        return int(value)
    return None


def _swap_if_greater(container, low, high):
    """Makes container[low] <= container[high] when both are integers (in either form)."""
    if not container:
        return
    a, b = _as_int(container.get(low)), _as_int(container.get(high))
    if a is not None and b is not None and a > b:
        container[low], container[high] = container[high], container[low]


_FILE_PATH = re.compile(r'(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}/){0,7}[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}')


_RAW32 = re.compile(r'[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]')


def _documented_jwk(jwk, crv):
    """A public OKP JWK as /v1/slim/group/secret documents it (api/routes/compute/group.ts okpJwk)."""
    limits = {'kid': 200, 'alg': 20, 'use': 10}
    return (isinstance(jwk, dict) and jwk.get('kty') == 'OKP' and jwk.get('crv') == crv and isinstance(jwk.get('x'), str)
            and _RAW32.fullmatch(jwk['x']) is not None
            and all(k in ('kty', 'crv', 'x') or (k in limits and isinstance(v, str) and len(v) <= limits[k]) for k, v in jwk.items()))


def _documented_member(m):
    return (isinstance(m, dict) and set(m) == {'member_id', 'x25519', 'ed25519'} and isinstance(m['member_id'], str)
            and re.fullmatch(r'client_[a-f0-9]{16}', m['member_id']) is not None
            and _documented_jwk(m['x25519'], 'X25519') and _documented_jwk(m['ed25519'], 'Ed25519'))

_DID_CHARACTER = re.compile(r'[A-Za-z0-9._:%-]')


def _did_as_generated(wire_value):
    """The wire form of a DID path value as schemathesis generated it. A DID may hold percent-encoded characters (W3C
    DID syntax, pct-encoded: did:web's `%3A` before a port), but schemathesis reads a `%XX` in a generated path value
    as an escape already made (transport/serialization.py quote_all unquotes before it quotes), so a generated
    `did:a:%0A1` would reach the route as `did:a:<line feed>1`, no DID at all. Each character the DID pattern does
    not allow can only have come from such an escape: it is put back as its escape, and the `%` is then escaped too
    (`%250A`), so the route receives the DID that was generated."""
    decoded = unquote(wire_value)
    generated = ''.join(c if _DID_CHARACTER.fullmatch(c) else ''.join('%%%02X' % b for b in c.encode()) for c in decoded)
    return quote(generated, safe='')


try:  # present in the venv through a2a-sdk (google-auth); without it the partner channels are fuzzed unsigned (401)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
except ImportError:  # pragma: no cover
    Ed25519PrivateKey = None

_PARTNER_PATHS = ('/v1/federated/kunlun', '/v1/kunlun/secure')


def _sign_partner_request(case):
    """Signs a partner channel request as a registered partner does (RFC 9421 over @method, @path and the
    Content-Digest of the exact JSON bytes requests sends: json.dumps with its default separators), with a fresh
    nonce so no two sends are replays (docs/partner.md)."""
    secret = os.environ.get('ZH_SCHEMATHESIS_PARTNER_KEY')
    if Ed25519PrivateKey is None or not secret or (case.media_type or 'application/json') != 'application/json':
        return
    try:
        raw = b'null' if case.body is None else json.dumps(case.body).encode()
    except (TypeError, ValueError):
        return
    key = Ed25519PrivateKey.from_private_bytes(base64.urlsafe_b64decode(secret + '=' * (-len(secret) % 4)))
    digest = 'sha-256=:' + base64.b64encode(hashlib.sha256(raw).digest()).decode() + ':'
    params = ('("@method" "@path" "content-digest");created=%d;keyid="%s";alg="ed25519";nonce="%s"'
              % (int(time.time()), os.environ['ZH_SCHEMATHESIS_PARTNER_ID'], secrets.token_hex(12)))
    signature_base = '"@method": POST\n"@path": %s\n"content-digest": %s\n"@signature-params": %s' % (case.operation.path, digest, params)
    if case.headers is None:
        case.headers = {}
    case.headers['Content-Digest'] = digest
    case.headers['Signature-Input'] = 'sig1=' + params
    case.headers['Signature'] = 'sig1=:' + base64.b64encode(key.sign(signature_base.encode())).decode() + ':'


# A verifier key as POST /admin/peers documents it (api/routes/federation/peers.ts): `<name>+<8 hex>+<base64 of the
# type byte and 32 bytes>`, the type given by the base64's first two characters.
_TLOG_KEY = re.compile(r'([!-*,-~]{1,200})\+[0-9a-f]{8}\+((?:A[Q-Za-f]|B[A-P])[A-Za-z0-9+/]{42})')


def _with_own_key_id(key):
    """A documented verifier key with the key id its name and key give: SHA-256(name || 0x0A || type || key)[:4] (C2SP
    signed-note). The document cannot state a hash; any 32 bytes are an Ed25519 public key the service takes."""
    m = _TLOG_KEY.fullmatch(key) if isinstance(key, str) else None
    if m is None:
        return key
    name, b64 = m.group(1), m.group(2)
    key_id = hashlib.sha256(name.encode() + b'\n' + base64.b64decode(b64)).digest()[:4].hex()
    return f'{name}+{key_id}+{b64}'


@schemathesis.hook
def map_case(context, case):
    path = case.operation.path
    query = case.query if isinstance(case.query, dict) else None
    body = case.body if isinstance(case.body, dict) else None
    # GET /api/proof/consistency: first <= second, a rule between two parameters.
    if path == '/api/proof/consistency':
        _swap_if_greater(query, 'first', 'second')
    # GET /api/proof/inclusion: seq <= tree_size, the same kind of rule.
    if path == '/api/proof/inclusion':
        _swap_if_greater(query, 'seq', 'tree_size')
    # POST /admin/dids/{did}/revoke: a DID generated valid is sent as generated (_did_as_generated). A value generated
    # to be invalid is left as it is.
    if path == '/admin/dids/{did}/revoke' and isinstance(case.path_parameters, dict) and isinstance(case.path_parameters.get('did'), str):
        if case.meta is None or not case.meta.is_negative_at(ParameterLocation.PATH):
            case.path_parameters['did'] = _did_as_generated(case.path_parameters['did'])
    # POST /api/report/truth: a `did` in the body must equal the X-DID header (a rule between body and header).
    if path == '/api/report/truth' and body is not None and isinstance(body.get('did'), str):
        body['did'] = os.environ['ZH_SCHEMATHESIS_DID']
    # POST /admin/homologous-tokens: a well-formed `did` must also name a registered DID (state the document cannot
    # know). A malformed one is left alone: that case is meant to be refused.
    if path == '/admin/homologous-tokens' and body is not None and _well_formed_did(body.get('did')):
        body['did'] = os.environ['ZH_SCHEMATHESIS_DID']
    # POST /a2a/register: a well-formed `did` must name a registered DID linked to no node (state the document cannot
    # know): the run's node DID, which the first such registration links (201); later ones are 409, documented.
    if path == '/a2a/register' and body is not None and _well_formed_did(body.get('did')):
        body['did'] = os.environ['ZH_SCHEMATHESIS_NODE_DID']
    # POST /a2a/directory-tree/merge: a rejection must give a reason (a rule between two members).
    if path == '/a2a/directory-tree/merge' and body is not None and body.get('decision') == 'reject':
        reason = body.get('reason', '')
        if isinstance(reason, str) and not reason.strip():
            body['reason'] = 'rejected by the fuzzer'
    # POST /dal/deploy: the keys of `files` are relative paths (core/deploy/web.ts, FILE_PATH_PATTERN); OpenAPI 3.0
    # cannot constrain the keys of a map (no propertyNames), so a generated key that is not one becomes a plain name.
    if path == '/dal/deploy' and body is not None and isinstance(body.get('files'), dict):
        body['files'] = {(k if isinstance(k, str) and _FILE_PATH.fullmatch(k) else f'file-{i}.txt'): v for i, (k, v) in enumerate(body['files'].items())}
    # POST /dal/deploy config: a fragment's nginx grammar and confinement rules (core/deploy/fragment.ts) are beyond
    # a JSON schema; a generated fragment within its documented length becomes a well-formed one for its target (an
    # empty one stays: it removes; an over-long one stays: it is meant to be refused).
    if path == '/dal/deploy' and body is not None and body.get('action') == 'config' and isinstance(body.get('fragment'), str) and isinstance(body.get('target'), str):
        if 0 < len(body['fragment']) <= 16384:
            body['fragment'] = f'location = /{body["target"]}/fuzz {{ return 200 "fuzz"; }}'
    # POST /v1/slim/group/secret (auth oauth, which the config cannot fill in for an oauth2 scheme): the fuzzer's access
    # token; and a group's members must be registered OAuth clients with usable keys, listed once (state and rules the
    # document cannot state), so a member list valid as documented becomes the fuzzer's own client with real public
    # keys (an invalid list is meant to be refused, and is left alone).
    if path == '/v1/slim/group/secret':
        if case.headers is None:
            case.headers = {}
        case.headers.setdefault('Authorization', 'Bearer ' + os.environ['ZH_SCHEMATHESIS_OAUTH_TOKEN'])
        if body is not None and isinstance(body.get('members'), list) and 0 < len(body['members']) <= 64 and all(_documented_member(m) for m in body['members']):
            body['members'] = [json.loads(os.environ['ZH_SCHEMATHESIS_SLIM_MEMBER'])]
    # POST /v1/federated/kunlun, /v1/kunlun/secure (auth partner_federation): each request is signed over its body, a
    # credential no static config can give, so the hook signs as the partner the run registered.
    if path in _PARTNER_PATHS:
        _sign_partner_request(case)
    # POST /admin/peers: a pinned key's id is a hash of its name and key (a rule the document cannot state), so a
    # documented key gets its own id (a malformed one is left alone: it is meant to be refused).
    if path == '/admin/peers' and body is not None and isinstance(body.get('tlog'), dict):
        for field in ('verifier_key', 'witness_key'):
            if field in body['tlog']:
                body['tlog'][field] = _with_own_key_id(body['tlog'][field])
    return case
