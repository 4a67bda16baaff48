#include "eval/ap.h"

#include <algorithm>
#include <cmath>

namespace kestrel::eval {

void InterpAscending(const double* queries, size_t num_queries, const double* xp, const double* fp, size_t n,
                     double left, double right, double* out) {
  size_t j = 0;  // candidate: last index with xp[j] <= q
  for (size_t k = 0; k < num_queries; ++k) {
    const double q = queries[k];
    if (q < xp[0]) {
      out[k] = left;
      continue;
    }
    if (q > xp[n - 1]) {
      out[k] = right;
      continue;
    }
    while (j + 1 < n && xp[j + 1] <= q) ++j;
    if (j == n - 1 || xp[j] == q) {
      out[k] = fp[j];
    } else {
      const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
      out[k] = slope * (q - xp[j]) + fp[j];
    }
  }
}

std::vector<double> Linspace01(size_t n) {
  std::vector<double> x(n);
  if (n == 0) return x;
  if (n == 1) {
    x[0] = 0.0;
    return x;
  }
  const double step = 1.0 / double(n - 1);
  for (size_t i = 0; i < n; ++i) x[i] = double(i) * step;
  x[n - 1] = 1.0;
  return x;
}

namespace {

// mrec/mpre with sentinels and the right-to-left running maximum.
void Envelope(const std::vector<double>& recall, const std::vector<double>& precision,
              std::vector<double>& mrec, std::vector<double>& mpre) {
  const size_t n = recall.size();
  mrec.resize(n + 2);
  mpre.resize(n + 2);
  mrec[0] = 0.0;
  mpre[0] = 1.0;
  std::copy(recall.begin(), recall.end(), mrec.begin() + 1);
  std::copy(precision.begin(), precision.end(), mpre.begin() + 1);
  mrec[n + 1] = 1.0;
  mpre[n + 1] = 0.0;
  for (size_t i = n + 1; i-- > 0;) mpre[i] = std::max(mpre[i], mpre[i + 1]);
}

const std::vector<double>& Grid101() {
  static const std::vector<double> kGrid = Linspace01(101);
  return kGrid;
}

}  // namespace

double ComputeAp(const std::vector<double>& recall, const std::vector<double>& precision) {
  std::vector<double> mrec, mpre;
  Envelope(recall, precision, mrec, mpre);
  const std::vector<double>& x = Grid101();
  double y[101];
  InterpAscending(x.data(), x.size(), mrec.data(), mpre.data(), mrec.size(), mpre.front(), mpre.back(), y);
  double ap = 0.0;
  for (size_t i = 0; i + 1 < x.size(); ++i) ap += (x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2.0;
  return ap;
}

std::vector<double> PrecisionEnvelopeAt(const std::vector<double>& recall,
                                        const std::vector<double>& precision, size_t num_points) {
  std::vector<double> mrec, mpre;
  Envelope(recall, precision, mrec, mpre);
  const std::vector<double> x = Linspace01(num_points);
  std::vector<double> y(num_points);
  InterpAscending(x.data(), x.size(), mrec.data(), mpre.data(), mrec.size(), mpre.front(), mpre.back(),
                  y.data());
  return y;
}

std::vector<double> SmoothBox(const std::vector<double>& y, double fraction) {
  const size_t n = y.size();
  if (n == 0) return {};
  const long nf = long(std::nearbyint(double(n) * fraction * 2)) / 2 + 1;
  const long half = nf / 2;
  std::vector<double> padded;
  padded.reserve(n + 2 * size_t(half));
  padded.insert(padded.end(), size_t(half), y.front());
  padded.insert(padded.end(), y.begin(), y.end());
  padded.insert(padded.end(), size_t(half), y.back());
  const double w = 1.0 / double(nf);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (long k = 0; k < nf; ++k) s += padded[i + size_t(k)] * w;
    out[i] = s;
  }
  return out;
}

}  // namespace kestrel::eval
