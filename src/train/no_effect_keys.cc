#include "train/no_effect_keys.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kestrel::train {

namespace {

struct Key {
  const char* name;
  std::string NoEffectKeys::*field;
  const char* why;
};

const Key kKeys[] = {
    {"dropout", &NoEffectKeys::dropout, "the reference uses it for classification heads only"},
    {"overlap_mask", &NoEffectKeys::overlap_mask, "segmentation only"},
    {"mask_ratio", &NoEffectKeys::mask_ratio, "segmentation only"},
    {"pose", &NoEffectKeys::pose, "pose estimation only"},
    {"kobj", &NoEffectKeys::kobj, "pose estimation only"},
    {"copy_paste", &NoEffectKeys::copy_paste,
     "the reference pastes segmentation polygons, which detection "
     "labels do not have"},
    {"copy_paste_mode", &NoEffectKeys::copy_paste_mode, "copy_paste needs segmentation polygons"},
    {"auto_augment", &NoEffectKeys::auto_augment, "classification only"},
    {"erasing", &NoEffectKeys::erasing, "classification only"},
    {"crop_fraction", &NoEffectKeys::crop_fraction, "classification only"},
    {"bgr", &NoEffectKeys::bgr, "Kestrel has no channel-swap augmentation"},
    {"profile", &NoEffectKeys::profile, "Kestrel does not profile ONNX/TensorRT during training"},
    {"verbose", &NoEffectKeys::verbose, "Kestrel's console is the same either way"},
    {"save", &NoEffectKeys::save, "Kestrel always writes the run's checkpoints and weights"},
};

bool AsNumber(const std::string& s, double* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*v);
}

bool AsBool(std::string s, bool* v) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on") return *v = true, true;
  if (s == "false" || s == "no" || s == "off") return *v = false, true;
  return false;
}

bool SameValue(const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  if (AsNumber(a, &x) && AsNumber(b, &y)) return x == y;
  bool p = false, q = false;
  if (AsBool(a, &p) && AsBool(b, &q)) return p == q;
  return a == b;
}

}  // namespace

void NoEffectKeys::Bind(OptionSet& s) {
  const NoEffectKeys defaults;
  for (const Key& k : kKeys) {
    s.String(k.name, &(this->*k.field),
             std::string("no effect (") + k.why + "): accepted from reference configs; a value other than " +
                 defaults.*k.field + " gets a warning");
  }
}

std::vector<std::string> NoEffectKeys::Warnings() const {
  const NoEffectKeys defaults;
  std::vector<std::string> out;
  for (const Key& k : kKeys) {
    if (SameValue(this->*k.field, defaults.*k.field)) continue;
    out.push_back(std::string(k.name) + "=" + this->*k.field + " has no effect: " + k.why);
  }
  return out;
}

}  // namespace kestrel::train
