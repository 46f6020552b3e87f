"""FEEL results as JSON values: what the engine stores as variables and DMN reports as inputs and outputs.

Whole-number decimals become ints (up to :data:`MAX_INT_DIGITS` digits), other decimals floats, temporals their ISO
text and days-time durations ISO durations (``P1DT2H``); anything else its text.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from ._values import MAX_INT_DIGITS


def to_json_value(value: Any) -> Any:
    """FEEL results to JSON-compatible values (decimals, temporals and durations become numbers and strings)."""
    if value is None or isinstance(value, bool | int | str | float):
        return value
    if isinstance(value, Decimal):
        if value.is_finite() and value.adjusted() < MAX_INT_DIGITS and value == value.to_integral_value():
            return int(value)
        return float(value)  # a whole number this big would take seconds to build as an int
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _iso_duration(value)
    return str(value)


def _iso_duration(d: dt.timedelta) -> str:
    total = int(d.total_seconds())
    sign = "-" if total < 0 else ""
    total = abs(total)
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    out = f"{sign}P"
    if days:
        out += f"{days}D"
    if hours or minutes or seconds or not days:
        out += "T"
        if hours:
            out += f"{hours}H"
        if minutes:
            out += f"{minutes}M"
        if seconds or not (hours or minutes):
            out += f"{seconds}S"
    return out
