"""netrig's vocabulary, defined once: units (durations, rates, speeds, counts and their
formatting), frame sizes (fixed, mixes, random, increment), the line rate and the wire overhead,
the RFC 2544 size list, and shared defaults. Every other layer imports it; the engine's own tables
(mixes, sizes, overhead, drain) come from ``netrig._native``."""
from netrig.model import defaults
from netrig.model.frames import (
    MAX_FRAME_SIZE,
    MIN_FRAME_SIZE,
    MIXES,
    RFC2544_FRAME_SIZES,
    FrameSize,
    LineRate,
    largest_frame,
    parse_frame_sizes,
    rate_object,
    size_label,
    size_sort_key,
)
from netrig.model.units import (
    MAX_DRAIN_S,
    MAX_DURATION_S,
    MAX_FRAMES,
    MAX_RATE_BPS,
    MAX_RATE_PPS,
    WIRE_OVERHEAD_BYTES,
    Rate,
    cpu_list,
    duration_limit,
    format_bps,
    format_ns,
    format_ns_range,
    format_pps,
    format_pps_range,
    format_seconds,
    format_si,
    parse_count,
    parse_duration,
    parse_rate,
    parse_speed,
)

__all__ = [
    "defaults", "FrameSize", "LineRate", "MIXES", "RFC2544_FRAME_SIZES", "MIN_FRAME_SIZE", "MAX_FRAME_SIZE",
    "WIRE_OVERHEAD_BYTES", "largest_frame", "parse_frame_sizes", "rate_object", "size_label", "size_sort_key", "Rate",
    "parse_rate", "parse_duration", "parse_speed", "parse_count", "cpu_list", "format_bps", "format_pps", "format_ns",
    "format_pps_range", "format_ns_range",
    "format_seconds", "format_si", "MAX_DURATION_S", "MAX_DRAIN_S", "MAX_RATE_PPS", "MAX_RATE_BPS", "MAX_FRAMES",
    "duration_limit",
]
