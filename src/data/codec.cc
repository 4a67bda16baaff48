#include "data/codec.h"

// jpeglib.h needs <cstdio> (FILE, size_t) first.
// clang-format off
#include <csetjmp>
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kestrel::data {
namespace {

// ---- libjpeg: errors longjmp back to the call that set `jump`; only C
// frames (libjpeg's) lie between, so no destructor is skipped.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  c->err->format_message(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (e.g. "extraneous bytes before marker") stay quiet: stderr is
// not where a dataset's findings go, and DecodeImage checks truncation itself.
void JpegQuiet(j_common_ptr /*c*/) {}

JpegError* InitJpegError(JpegError* e) {
  jpeg_std_error(&e->mgr);
  e->mgr.error_exit = JpegErrorExit;
  e->mgr.output_message = JpegQuiet;
  e->message[0] = '\0';
  return e;
}

// The inverted (Adobe) CMYK of libjpeg to BGR, as OpenCV converts it.
void CmykRowToBgr(const unsigned char* cmyk, unsigned char* bgr, int width) {
  for (int x = 0; x < width; ++x, cmyk += 4, bgr += 3) {
    const int k = cmyk[3];
    bgr[2] = static_cast<unsigned char>(k - (((255 - cmyk[0]) * k) >> 8));
    bgr[1] = static_cast<unsigned char>(k - (((255 - cmyk[1]) * k) >> 8));
    bgr[0] = static_cast<unsigned char>(k - (((255 - cmyk[2]) * k) >> 8));
  }
}

enum class CodecFail { kNone, kCorrupt, kMemory };

// `out` and `row` belong to the caller; after a longjmp only `cinfo` (never
// reassigned) is used.
CodecFail DecodeJpegInto(std::string_view bytes, cv::Mat* out, std::vector<unsigned char>* row,
                         JpegError* err) {
  jpeg_decompress_struct cinfo;
  cinfo.err = &InitJpegError(err)->mgr;
  if (setjmp(err->jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return CodecFail::kCorrupt;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));  // NOLINT(google-runtime-int): libjpeg's type
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.num_components == 4;
  const bool color = cinfo.num_components > 1;
  cinfo.out_color_space = cmyk ? JCS_CMYK : color ? JCS_EXT_BGR : JCS_GRAYSCALE;
  cinfo.out_color_components = cmyk ? 4 : color ? 3 : 1;
  jpeg_calc_output_dimensions(&cinfo);
  const int width = static_cast<int>(cinfo.output_width);
  const int height = static_cast<int>(cinfo.output_height);
  try {
    out->create(height, width, color ? CV_8UC3 : CV_8UC1);
    if (cmyk) row->resize(static_cast<size_t>(width) * 4);
  } catch (...) {
    jpeg_destroy_decompress(&cinfo);
    return CodecFail::kMemory;
  }
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    const int y = static_cast<int>(cinfo.output_scanline);
    JSAMPROW dst = cmyk ? row->data() : out->ptr<unsigned char>(y);
    jpeg_read_scanlines(&cinfo, &dst, 1);
    if (cmyk) CmykRowToBgr(row->data(), out->ptr<unsigned char>(y), width);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return CodecFail::kNone;
}

// ---- libpng: the same pattern through png_error/png_longjmp.
struct PngIo {
  const unsigned char* data = nullptr;
  size_t left = 0;
  std::string* sink = nullptr;  // the encoder's output
  char message[256] = {};
};

void PngError(png_structp png, png_const_charp msg) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->message, sizeof io->message, "%s", msg);
  png_longjmp(png, 1);
}

void PngWarning(png_structp /*png*/, png_const_charp /*msg*/) {}

void PngRead(png_structp png, png_bytep dst, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (n > io->left) png_error(png, "unexpected end of PNG data");
  std::memcpy(dst, io->data, n);
  io->data += n;
  io->left -= n;
}

void PngWrite(png_structp png, png_bytep src, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  bool failed = false;
  try {
    io->sink->append(reinterpret_cast<const char*>(src), n);
  } catch (...) {
    failed = true;  // png_error longjmps: never from inside a handler
  }
  if (failed) png_error(png, "out of memory");
}

void PngFlush(png_structp /*png*/) {}

CodecFail DecodePngInto(std::string_view bytes, cv::Mat* out, std::vector<png_bytep>* rows, PngIo* io) {
  io->data = reinterpret_cast<const unsigned char*>(bytes.data());
  io->left = bytes.size();
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, io, PngError, PngWarning);
  if (png == nullptr) return CodecFail::kMemory;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return CodecFail::kMemory;
  }
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    return CodecFail::kCorrupt;
  }
  png_set_read_fn(png, io, PngRead);
  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int depth = 0, color_type = 0;
  png_get_IHDR(png, info, &width, &height, &depth, &color_type, nullptr, nullptr, nullptr);
  // The channels OpenCV gives for IMREAD_UNCHANGED: alpha (or tRNS on an RGB
  // or palette image) makes four, gray alone one.
  int channels = 1;
  if (color_type == PNG_COLOR_TYPE_RGB || color_type == PNG_COLOR_TYPE_PALETTE) {
    channels = png_get_valid(png, info, PNG_INFO_tRNS) != 0 ? 4 : 3;
  } else if (color_type == PNG_COLOR_TYPE_GRAY_ALPHA || color_type == PNG_COLOR_TYPE_RGB_ALPHA) {
    channels = 4;
  }
  const bool sixteen = depth == 16;
  if (sixteen) png_set_swap(png);  // to the host's (little-endian) order of CV_16U
  if (channels < 4) {
    png_set_strip_alpha(png);
  } else {
    png_set_tRNS_to_alpha(png);
  }
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0 && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if ((color_type & PNG_COLOR_MASK_COLOR) != 0) {
    png_set_bgr(png);
  } else if (channels > 1) {
    png_set_gray_to_rgb(png);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  try {
    out->create(static_cast<int>(height), static_cast<int>(width),
                CV_MAKETYPE(sixteen ? CV_16U : CV_8U, channels));
    rows->resize(height);
  } catch (...) {
    png_destroy_read_struct(&png, &info, nullptr);
    return CodecFail::kMemory;
  }
  if (png_get_rowbytes(png, info) != out->cols * out->elemSize()) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::snprintf(io->message, sizeof io->message, "unexpected row size after the PNG transforms");
    return CodecFail::kCorrupt;
  }
  for (png_uint_32 y = 0; y < height; ++y) (*rows)[y] = out->ptr<png_byte>(static_cast<int>(y));
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return CodecFail::kNone;
}

// Frees what a C library malloc'ed (libjpeg's jpeg_mem_dest buffer).
struct LibcFree {
  void operator()(unsigned char* p) const { std::free(p); }  // NOLINT(cppcoreguidelines-no-malloc)
};

// A decoder's failure as a Status: kResourceExhausted when its pixels could
// not be allocated, else kCorruption with the library's message.
Status DecoderError(CodecFail fail, const char* format, const char* message) {
  if (fail == CodecFail::kMemory) {
    return Status::ResourceExhausted(std::string("out of memory for the ") + format + "'s pixels");
  }
  return Status::Corruption(std::string(format) + " decoder: " + message);
}

Status CheckEncodable(const cv::Mat& image, bool alpha_ok, const char* what) {
  const int c = image.channels();
  if (image.empty() || image.depth() != CV_8U || !(c == 1 || c == 3 || (alpha_ok && c == 4))) {
    return Status::InvalidArgument(std::string(what) + ": needs a non-empty 8-bit image with 1 or 3" +
                                   (alpha_ok ? " or 4" : "") + " channels, got " + std::to_string(c) +
                                   " channels of depth " + std::to_string(image.depth()));
  }
  return {};
}

// jpeg_mem_dest's buffer is malloc'ed by libjpeg; EncodeJpeg frees it on every path.
CodecFail EncodeJpegInto(const cv::Mat& image, int quality, unsigned char** buf,
                         unsigned long* size,  // NOLINT(google-runtime-int): libjpeg's type
                         JpegError* err) {
  jpeg_compress_struct cinfo;
  cinfo.err = &InitJpegError(err)->mgr;
  if (setjmp(err->jump) != 0) {
    jpeg_destroy_compress(&cinfo);
    return CodecFail::kCorrupt;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, buf, size);
  cinfo.image_width = static_cast<JDIMENSION>(image.cols);
  cinfo.image_height = static_cast<JDIMENSION>(image.rows);
  const bool color = image.channels() == 3;
  cinfo.input_components = color ? 3 : 1;
  cinfo.in_color_space = color ? JCS_EXT_BGR : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    // libjpeg only reads the rows; JSAMPROW is not const.
    JSAMPROW src =
        const_cast<unsigned char*>(image.ptr<unsigned char>(static_cast<int>(cinfo.next_scanline)));
    jpeg_write_scanlines(&cinfo, &src, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return CodecFail::kNone;
}

CodecFail EncodePngInto(const cv::Mat& image, std::vector<png_bytep>* rows, PngIo* io) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, io, PngError, PngWarning);
  if (png == nullptr) return CodecFail::kMemory;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return CodecFail::kMemory;
  }
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_write_struct(&png, &info);
    return CodecFail::kCorrupt;
  }
  png_set_write_fn(png, io, PngWrite, PngFlush);
  // OpenCV's defaults (tuned for speed): the sub filter, zlib level 1, RLE.
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_compression_level(png, 1);
  png_set_compression_strategy(png, 3);  // Z_RLE
  const int c = image.channels();
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.cols), static_cast<png_uint_32>(image.rows), 8,
               c == 1   ? PNG_COLOR_TYPE_GRAY
               : c == 3 ? PNG_COLOR_TYPE_RGB
                        : PNG_COLOR_TYPE_RGB_ALPHA,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  if (c > 1) png_set_bgr(png);
  for (int y = 0; y < image.rows; ++y) {
    (*rows)[static_cast<size_t>(y)] = const_cast<png_bytep>(image.ptr<png_byte>(y));  // only read
  }
  png_write_image(png, rows->data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return CodecFail::kNone;
}

}  // namespace

Result<cv::Mat> DecodeJpeg(std::string_view bytes) {
  cv::Mat out;
  std::vector<unsigned char> row;
  JpegError err{};
  const CodecFail fail = DecodeJpegInto(bytes, &out, &row, &err);
  if (fail == CodecFail::kNone) return out;
  return DecoderError(fail, "JPEG", err.message);
}

Result<cv::Mat> DecodePng(std::string_view bytes) {
  cv::Mat out;
  std::vector<png_bytep> rows;
  PngIo io;
  const CodecFail fail = DecodePngInto(bytes, &out, &rows, &io);
  if (fail == CodecFail::kNone) return out;
  return DecoderError(fail, "PNG", io.message);
}

Result<std::string> EncodeJpeg(const cv::Mat& image, int quality) {
  KESTREL_RETURN_IF_ERROR(CheckEncodable(image, false, "JPEG encoder"));
  if (quality < 1 || quality > 100) {
    return Status::InvalidArgument("JPEG encoder: quality " + std::to_string(quality) + " is not in 1..100");
  }
  // libjpeg reads row by row through ptr(y): a ROI needs no copy.
  unsigned char* buf = nullptr;
  unsigned long size = 0;  // NOLINT(google-runtime-int): libjpeg's type
  JpegError err{};
  const CodecFail fail = EncodeJpegInto(image, quality, &buf, &size, &err);
  // jpeg_mem_dest's buffer is libjpeg's malloc, on every path.
  const std::unique_ptr<unsigned char, LibcFree> owned(buf);
  if (fail != CodecFail::kNone) return Status::Internal(std::string("JPEG encoder: ") + err.message);
  try {
    return std::string(reinterpret_cast<const char*>(owned.get()), size);
  } catch (...) {
    return Status::ResourceExhausted("JPEG encoder: out of memory");
  }
}

Result<std::string> EncodePng(const cv::Mat& image) {
  KESTREL_RETURN_IF_ERROR(CheckEncodable(image, true, "PNG encoder"));
  std::string out;
  std::vector<png_bytep> rows;
  PngIo io;
  io.sink = &out;
  try {
    rows.resize(static_cast<size_t>(image.rows));
  } catch (...) {
    return Status::ResourceExhausted("PNG encoder: out of memory");
  }
  switch (EncodePngInto(image, &rows, &io)) {
    case CodecFail::kNone:
      return out;
    case CodecFail::kMemory:
      return Status::ResourceExhausted("PNG encoder: out of memory");
    case CodecFail::kCorrupt:
      break;
  }
  return Status::Internal(std::string("PNG encoder: ") + io.message);
}

}  // namespace kestrel::data
