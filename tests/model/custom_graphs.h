// Two custom model graphs (model=custom.yaml that is none of the built-in
// families), shared by the model yaml, weights and CLI tests (issue 28
// item 7).
#pragma once

namespace kestrel::testing {

// The reference's yolov8-p2.yaml (a P2/4 level, four Detect inputs) at a
// tiny scale, and a YOLO11-style graph of Kestrel's own (C3, C3k2, SPPF,
// C2PSA; Detect reading a backbone layer).
inline constexpr char kP2Yaml[] = R"(nc: 3
scales:
  t: [0.33, 0.125, 1024]
backbone:
  - [-1, 1, Conv, [64, 3, 2]] # 0-P1/2
  - [-1, 1, Conv, [128, 3, 2]] # 1-P2/4
  - [-1, 3, C2f, [128, True]]
  - [-1, 1, Conv, [256, 3, 2]] # 3-P3/8
  - [-1, 6, C2f, [256, True]]
  - [-1, 1, Conv, [512, 3, 2]] # 5-P4/16
  - [-1, 6, C2f, [512, True]]
  - [-1, 1, Conv, [1024, 3, 2]] # 7-P5/32
  - [-1, 3, C2f, [1024, True]]
  - [-1, 1, SPPF, [1024, 5]] # 9
head:
  - [-1, 1, nn.Upsample, [None, 2, "nearest"]]
  - [[-1, 6], 1, Concat, [1]] # cat backbone P4
  - [-1, 3, C2f, [512]] # 12
  - [-1, 1, nn.Upsample, [None, 2, "nearest"]]
  - [[-1, 4], 1, Concat, [1]] # cat backbone P3
  - [-1, 3, C2f, [256]] # 15 (P3/8-small)
  - [-1, 1, nn.Upsample, [None, 2, "nearest"]]
  - [[-1, 2], 1, Concat, [1]] # cat backbone P2
  - [-1, 3, C2f, [128]] # 18 (P2/4-xsmall)
  - [-1, 1, Conv, [128, 3, 2]]
  - [[-1, 15], 1, Concat, [1]] # cat head P3
  - [-1, 3, C2f, [256]] # 21 (P3/8-small)
  - [-1, 1, Conv, [256, 3, 2]]
  - [[-1, 12], 1, Concat, [1]] # cat head P4
  - [-1, 3, C2f, [512]] # 24 (P4/16-medium)
  - [-1, 1, Conv, [512, 3, 2]]
  - [[-1, 9], 1, Concat, [1]] # cat head P5
  - [-1, 3, C2f, [1024]] # 27 (P5/32-large)
  - [[18, 21, 24, 27], 1, Detect, [nc]] # Detect(P2, P3, P4, P5)
)";

inline constexpr char kMixedYaml[] = R"(nc: 2
scales:
  m: [0.5, 0.25, 512]
backbone:
  - [-1, 1, Conv, [64, 3, 2]]
  - [-1, 1, Conv, [128, 3, 2]]
  - [-1, 2, C3k2, [128, False, 0.25]]
  - [-1, 1, Conv, [256, 3, 2]]
  - [-1, 1, C3, [256]] # 4 P3/8
  - [-1, 1, Conv, [512, 3, 2]]
  - [-1, 2, C3k2, [512, True]] # 6 P4/16
  - [-1, 1, Conv, [512, 3, 2]]
  - [-1, 1, SPPF, [512, 5]]
  - [-1, 2, C2PSA, [512]] # 9 P5/32
head:
  - [-1, 1, nn.Upsample, [None, 2, nearest]]
  - [[-1, 6], 1, Concat, [1]]
  - [-1, 1, C2f, [256]] # 12 P4/16
  - [-1, 1, Conv, [256, 3, 2]]
  - [[-1, 9], 1, Concat, [1]]
  - [-1, 1, C3k2, [512, True]] # 15 P5/32
  - [[4, 12, 15], 1, Detect, [nc]]
)";

}  // namespace kestrel::testing
