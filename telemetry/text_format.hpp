#pragma once
// The Prometheus text exposition format (0.0.4) of a set of metric families, with every number written as
// the shortest decimal that reads back to the same double (std::to_chars).
//
// Why not prometheus::TextSerializer: prometheus-cpp 1.0 prints doubles with 16 significant digits, so the
// histogram bound 2^23 ns (the double nearest 0.008388608 s) comes out as le="0.008388608000000001", and
// counters above 10^16 lose digits. Go's client library prints the shortest form (strconv 'g', -1); so
// does this, which makes every `le` the exact decimal of its bound in seconds.

#include <prometheus/metric_family.h>

#include <span>
#include <string>

namespace rdmagate::telemetry {

// Shortest round-trip decimal of v; NaN, +Inf and -Inf as the format spells them.
std::string format_value(double v);

// # HELP, # TYPE and one line per sample, families in the given order. Histograms: the _bucket lines (with
// `le`, +Inf included, from the buckets given), then _sum and _count.
std::string serialize_text(std::span<const prometheus::MetricFamily> families);

}  // namespace rdmagate::telemetry
