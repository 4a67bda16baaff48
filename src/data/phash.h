// Perceptual image hashing (DCT pHash) for near-duplicate detection.
//
// The hash summarizes the low-frequency structure of an image in 64 bits, so
// that re-encoding, rescaling and small brightness/contrast changes flip few
// bits while unrelated images differ in about half of them. Compare two
// hashes with HammingDistance(); see near_dup.h for searching many of them.
//
// Algorithm (hashes are compared only within one import, never stored, so a
// change here changes findings, not data):
//   1. Resize to 32x32 with INTER_AREA, per channel, in the input's depth.
//   2. gray = (c0 + c1 + c2) / 3 for 3/4-channel input (alpha ignored), the
//      single channel otherwise, as float. Equal weights make the hash
//      independent of channel order, so RGB and BGR buffers hash the same.
//   3. 2-D DCT-II (cv::dct) of the 32x32 block.
//   4. Keep the top-left 8x8 coefficients, row-major: coefficient (u, v)
//      (u = vertical frequency, v = horizontal) maps to bit 63 - (8u + v),
//      i.e. the DC term is the most significant bit.
//   5. Threshold each of the 64 coefficients against the median of the 63 AC
//      coefficients (the DC term is left out of the median because it is the
//      mean brightness, orders of magnitude larger than the rest; the DC bit
//      is therefore set for any non-black image). Bit = coefficient > median.
//
// Typical distances (measured in tests/data/phash_test.cc on textured
// synthetic images): JPEG q70 re-encode, x0.5 resize or +10 brightness <= 6;
// unrelated images ~32 (rarely below 20).
#pragma once

#include <cstdint>
#include <opencv2/core/mat.hpp>

namespace kestrel::data {

// 64-bit DCT pHash of a decoded image, see the file comment.
// Expects a 2-D CV_8U image (cv::imdecode output) with 1-4 channels in any
// order; a 4th channel is alpha and is ignored. Other depths are hashed on
// their raw values. An empty image hashes to 0: callers check decoding first.
// Thread-safe.
uint64_t PerceptualHash(const cv::Mat& image);

// Number of differing bits, 0..64.
inline int HammingDistance(uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); }

}  // namespace kestrel::data
