// Detects objects in a binary PPM (P6) image with an exported Kestrel model
// and prints one line per detection:
//   class_id class_name score x1 y1 x2 y2
// Usage: detect MODEL.onnx IMAGE.ppm [conf]
// Exit status: 0 success, 1 a failure (printed on stderr), 2 bad usage.
// Only the installed <kestrel/detector.h> is used; PPM keeps the example
// free of an image library (convert with e.g. `convert in.jpg out.ppm`).
#include <kestrel/detector.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

// Reads a binary PPM with maxval 255 into packed RGB; false on anything else.
bool ReadPpm(const std::string& path, std::vector<uint8_t>* rgb, int* width, int* height) {
  std::ifstream in(path, std::ios::binary);
  std::string magic;
  int maxval = 0;
  if (!(in >> magic >> *width >> *height >> maxval) || magic != "P6" || maxval != 255 || *width <= 0 ||
      *height <= 0) {
    return false;
  }
  in.get();  // the one whitespace byte after the header
  rgb->resize(static_cast<size_t>(*width) * static_cast<size_t>(*height) * 3);
  return static_cast<bool>(
      in.read(reinterpret_cast<char*>(rgb->data()), static_cast<std::streamsize>(rgb->size())));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: detect MODEL.onnx IMAGE.ppm [conf]\n";
    return 2;
  }
  kestrel::DetectorOptions options;
  if (argc == 4) options.conf = std::strtof(argv[3], nullptr);
  std::string error;
  std::unique_ptr<kestrel::Detector> detector = kestrel::Detector::Open(argv[1], options, &error);
  if (!detector) {
    std::cerr << "cannot open the model: " << error << "\n";
    return 1;
  }
  std::vector<uint8_t> rgb;
  kestrel::ImageView image;
  if (!ReadPpm(argv[2], &rgb, &image.width, &image.height)) {
    std::cerr << argv[2] << ": not a binary PPM (P6, maxval 255)\n";
    return 1;
  }
  image.data = rgb.data();
  image.format = kestrel::PixelFormat::kRgb;
  std::vector<kestrel::Detection> detections;
  if (!detector->Detect(image, &detections, &error)) {
    std::cerr << "detection failed: " << error << "\n";
    return 1;
  }
  std::cout << "kestrel " << kestrel::Version() << ", input " << detector->InputSize() << " px, "
            << detector->ClassNames().size() << " classes, " << detections.size() << " detections\n";
  for (const kestrel::Detection& d : detections) {
    std::printf("%d %s %.4f %.1f %.1f %.1f %.1f\n", d.class_id, d.class_name.c_str(), d.score, d.x1, d.y1,
                d.x2, d.y2);
  }
  return 0;
}
