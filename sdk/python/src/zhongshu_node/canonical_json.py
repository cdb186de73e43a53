"""RFC 8785 canonical JSON (JCS), as the hub hashes ledger entries: object members sorted by UTF-16 code units, no
white space, numbers written as ECMAScript's JSON.stringify writes them. The SDK recomputes leaf hashes with it,
so it must give the hub's bytes for every value that came from JSON."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Optional


def _number(value: float) -> str:
    """ECMAScript's Number::toString for a finite double (shortest round-trip digits, its exponent rules)."""
    if value == 0:
        return "0"  # -0 too
    if value < 0:
        return "-" + _number(-value)
    mantissa, _, exp_text = repr(float(value)).partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # The decimal point's position n in ECMAScript's terms: value = 0.d1d2... x 10^n.
    n = (
        len(whole.lstrip("0")) + exponent
        if whole.strip("0")
        else exponent - (len(fraction) - len(fraction.lstrip("0")))
    )
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    return (digits[0] + ("." + digits[1:] if k > 1 else "")) + "e" + sign + str(abs(e))


def canonical_json(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else _number(float(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("canonical JSON has no NaN or Infinity")
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, Mapping):
        # UTF-16 big-endian bytes compare as UTF-16 code units do: the order RFC 8785 asks for.
        keys = sorted(value.keys(), key=lambda k: k.encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical_json(value[k]) for k in keys) + "}"
    raise TypeError(f"canonical JSON cannot encode a {type(value).__name__}")


def leaf_bytes(
    *,
    seq: int,
    event_id: str,
    kind: str,
    key: str,
    truth_type: Optional[str],
    did: Optional[str],
    created_at: str,
    value: Any,
) -> bytes:
    """An entry's leaf bytes: UTF-8 of the canonical JSON of its eight fields (docs/ledger.md)."""
    fields = {
        "created_at": created_at,
        "did": did,
        "event_id": event_id,
        "key": key,
        "kind": kind,
        "seq": seq,
        "truth_type": truth_type,
        "value": value,
    }
    return canonical_json(fields).encode("utf-8")
