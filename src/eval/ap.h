// Curve math of the reference YOLO metrics (docs/metrics.md has the full
// conventions). Pure functions over plain arrays; thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace kestrel::eval {

// numpy.interp semantics for ascending `queries`: xp is non-decreasing
// (repeated values allowed), fp has the same length. For each query q:
// q < xp[0] -> left; q > xp[n-1] -> right; otherwise j = the LAST index with
// xp[j] <= q, and the value is fp[j] when xp[j] == q or j == n-1, else
// fp[j] + (fp[j+1]-fp[j])/(xp[j+1]-xp[j]) * (q - xp[j]). One merged pass,
// O(n + queries). REQUIRES: n >= 1, queries ascending, out has queries.size().
void InterpAscending(const double* queries, size_t num_queries, const double* xp, const double* fp, size_t n,
                     double left, double right, double* out);

// Average precision of one precision/recall curve (points in descending
// confidence order): prepend (recall 0, precision 1), append (1, 0), make
// precision the running maximum from the right, sample it with
// InterpAscending at 101 recalls 0, 0.01, ..., 1 and integrate with the
// trapezoidal rule. Perfect detection gives 0.995, not 1 (the appended point
// makes the value at recall 1 zero) — same as the reference.
// REQUIRES: recall.size() == precision.size().
double ComputeAp(const std::vector<double>& recall, const std::vector<double>& precision);

// Same curve (envelope) sampled at `num_points` recalls 0..1, for PR plots.
std::vector<double> PrecisionEnvelopeAt(const std::vector<double>& recall,
                                        const std::vector<double>& precision, size_t num_points);

// `n` evenly spaced values from 0 to 1 inclusive (numpy.linspace(0, 1, n)).
std::vector<double> Linspace01(size_t n);

// Box filter over round(len * fraction * 2) / 2 * 2 + 1 samples, edges padded
// with the end values; output has the input's length (reference smooth()).
std::vector<double> SmoothBox(const std::vector<double>& y, double fraction);

}  // namespace kestrel::eval
