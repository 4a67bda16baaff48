// The reference framework's model yaml (`model=custom.yaml`), read as data:
// nc, scales (or the old depth_multiple/width_multiple), backbone/head rows
// [from, repeats, module, args]. Each row's module is looked up in Kestrel's
// module registry by the reference's name (Conv, C2f, C3, C3k2, SPPF, C2PSA,
// nn.Upsample, Concat, Detect) and its args checked. Rows equal to a built-in
// graph (yolov8.yaml, yolo11.yaml, yolov5.yaml) at one of its scales are that
// model (yolov8s...); any other graph is a custom one (ModelSpec::graph,
// checked by CheckGraph), which the weights carry. Torch-free (yaml-cpp).
#pragma once

#include <string>

#include "core/status.h"
#include "model/spec.h"

namespace kestrel::model {

struct ModelYaml {
  ModelSpec spec;   // the graph's family, the picked scale with the file's multipliers, the file's nc
  std::string why;  // "yolov8 graph, scale 's' (from the file name)" / "custom graph 'p2' (24 layers), ...",
                    // for the line that says what was used
};

// Reads `path`. The scale is picked as the reference does: the letter after
// the version in the file name (yolov8s.yaml -> s) when the file has a
// `scales` table, else the table's first entry; depth_multiple /
// width_multiple (max_channels 1024) when it has no table. nc: the file's
// (80 when absent). Errors (InvalidArgument at file:line, field naming the
// key or row): a module not in the registry (by name), a `from` index that
// is not an earlier layer, args of the wrong count or type, a scale the
// table lacks, a custom graph CheckGraph refuses (the layer is named);
// NotFound / a YAML syntax error from reading.
Result<ModelYaml> ReadModelYaml(const std::string& path);

// The family's built-in table as a model yaml file (nc, scales, backbone,
// head in the reference's spelling: ReferenceModelYaml), which ReadModelYaml
// reads back to the same layer plan.
std::string ModelYamlText(Family family, int nc = 80);

// A spec back from GraphYaml's text (JSON is YAML) as weights and
// checkpoints carry it, read like a file (the same checks); `nc` replaces
// the text's; `origin` names the weights file in errors.
Result<ModelSpec> SpecFromGraphYaml(const std::string& text, int nc, const std::string& origin);

// True when `model` names a yaml file on disk (ends with .yaml/.yml and
// exists): model= then reads it rather than the built-in of that name.
bool IsModelYamlFile(const std::string& model);

}  // namespace kestrel::model
