"""Kubernetes resource quantities ("500m", "2", "1Gi", "1e3") in the simulator's units, without Decimal.

`kubernetes.utils.parse_quantity` builds Decimals and is far too slow for thousands of nodes per request.
"""

from __future__ import annotations

import math
import re

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")
_FACTOR = {
    None: 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}
_MIB = 2.0**20
# Converted values stay below this so sums over thousands of nodes fit the Cluster's int64 arrays.
LIMIT = 2**50


class QuantityError(ValueError):
    pass


def parse(value: object) -> float:
    """A quantity as a float in base units; raises QuantityError for anything else (also negatives)."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if match is None:
            raise QuantityError(f"not a quantity: {value[:40]!r}")
        mantissa, exponent, suffix = match.groups()
        try:
            number = float(mantissa) * (10.0 ** int(exponent) if exponent else _FACTOR[suffix])
        except (OverflowError, ValueError):  # 1e999, or an exponent too long for int()
            raise QuantityError(f"quantity out of range: {value[:40]!r}") from None
    else:
        raise QuantityError(f"not a quantity: {type(value).__name__}")
    if not math.isfinite(number) or number < 0:
        raise QuantityError(f"quantity out of range: {value!r}")
    return number


def _bounded(number: float, value: object, limit: int = LIMIT) -> int:
    if number > limit:
        raise QuantityError(f"quantity too large: {str(value)[:40]!r}")
    return int(number)


def milli_cpu(value: object, up: bool = True) -> int:
    """CPU in millicores, rounded up (requests: Kubernetes rounds sub-milli CPU up) or down (capacity)."""
    millis = parse(value) * 1000
    return _bounded(math.ceil(millis - 1e-9) if up else math.floor(millis + 1e-9), value)


def mebibytes(value: object, up: bool = True) -> int:
    """Memory in MiB, rounded up (requests: never under-count) or down (capacity: never over-promise)."""
    mib = parse(value) / _MIB
    return _bounded(math.ceil(mib - 1e-9) if up else math.floor(mib + 1e-9), value)


def count(value: object, limit: int = LIMIT) -> int:
    """An integer resource such as pods or nvidia.com/gpu."""
    return _bounded(math.floor(parse(value) + 1e-9), value, limit)
